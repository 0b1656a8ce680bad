// The IO behind the engine machine's named actors: each one resolves the
// engine's current spec and calls the phase function. They wait for the state
// file to hold the transition that invoked them before acting, so a crash
// never leaves a side effect the state cannot lead back to.
import { fromPromise } from "xstate";
import type { StepInput } from "../../machines/engine.js";
import type { EngineSpec } from "../desired/types.js";
import type { EngineBackend } from "../backends/types.js";
import type { AppIdentity } from "../phases/plan.js";
import type { EngineHandle } from "../phases/types.js";
import { unlessGone, type RunningEngine } from "./engine-gone.js";
import { PhaseError, inStep, toErrorRecord, type Step } from "../errors.js";
import { secondsSince, type ControllerObserver } from "./observer.js";
import { inspect } from "../phases/inspect.js";
import type { CheckpointObservation } from "../phases/checkpoint-agreement.js";
import { prepare, readPlan } from "../phases/prepare.js";
import { check } from "../phases/check.js";
import type { SharedStarts } from "./shared-starts.js";
import type { NodeSlots } from "./node-slots.js";
import type { JoinedRuns } from "../hosts/joined-runs.js";
import { probe } from "../phases/probe.js";
import { capture } from "../phases/capture.js";
import type { Logger } from "../log.js";
import type { NodeHosts } from "../hosts/node-hosts.js";
import type { Failpoint } from "../failpoints.js";
import { attestAndServe, stopEngineAndSidecar } from "../phases/attestation-sidecar.js";
import { waitLogLine, type ProgressSink } from "../phases/progress.js";
import { stopWait } from "../phases/stop-native.js";

export interface PhaseDeps {
  stateDir: string;
  app: AppIdentity;
  scriptPath: string;
  stopGraceMs: number;
  log: Logger;
  /** The current desired spec of an engine, if it is still desired. */
  spec(engine: string): EngineSpec | undefined;
  backend(kind: EngineSpec["backend"]): EngineBackend;
  /** How each node is reached: host-side steps (inspection) run on the engine's own node. */
  hosts: NodeHosts;
  /** Resolves once every transition so far is on disk. */
  persisted(): Promise<void>;
  /** Whether the engine is suspended now, and a wait until it is resumed (src/controller/resume-gate.ts). */
  suspension?: { suspended(engine: string): boolean; untilResumed(engine: string, signal: AbortSignal): Promise<void> };
  /** Resolves once the serving fleet reflects every transition so far (nothing stopped is still listed). */
  servingSettled(): Promise<void>;
  secrets(): string[];
  /** The nodes' slots (NARWHAL_NODE_CONCURRENCY): inspections and checks hold one (starts, in sharedStarts). */
  slots: NodeSlots;
  /** Engines sharing a GPU start together through start-shared. */
  sharedStarts: SharedStarts;
  /** Inspection's commands running on the nodes: an engine's inspection joins the same one of its node's. */
  joinedRuns: JoinedRuns;
  /** What the other engines' recorded inspections observed of their checkpoints (synchronous: see InspectOptions). */
  checkpointPeers(engine: string): CheckpointObservation[];
  failpoint?: Failpoint;
  /** Told each step's beginning, awaited conditions and end (how long it ran, why it failed): metrics and the live view. */
  observer?: ControllerObserver;
}

async function planPorts(runDir: string): Promise<number[]> {
  try {
    const { plan } = await readPlan(runDir);
    return [plan.ports.http, plan.ports.attestation, plan.ports.nixl_side_channel, ...plan.ports.transfer];
  } catch {
    return [];
  }
}

function need<T>(value: T | null, engine: string, step: Step, what: string): T {
  if (value === null) throw new PhaseError(engine, step, `no ${what} recorded for this step`, { retryable: false });
  return value;
}

export function phaseActors(deps: PhaseDeps) {
  const specFor = (input: StepInput, step: Step): EngineSpec => {
    const spec = deps.spec(input.engine);
    if (!spec || spec.input_hash !== input.desiredHash) {
      // The desired state moved on; the DESIRED_CHANGED/REMOVE event is already on its way.
      throw new PhaseError(input.engine, step, "the desired state changed while this step was pending", {
        retryable: true,
      });
    }
    return spec;
  };
  const step = <T>(name: Step, body: (input: StepInput, signal: AbortSignal) => Promise<T>) =>
    fromPromise<T, StepInput>(async ({ input, signal }) => {
      await deps.persisted();
      signal.throwIfAborted();
      // Suspended while its previous step ran: this step does not begin until `narwhal resume`.
      if (deps.suspension?.suspended(input.engine)) {
        deps.log.info(`${name} held: ${input.engine} is suspended; narwhal resume ${input.engine} lets it begin`, {
          engine: input.engine,
          step: name,
        });
        await deps.suspension.untilResumed(input.engine, signal);
        signal.throwIfAborted();
      }
      deps.log.debug(`${name} begins`, { engine: input.engine, step: name });
      deps.observer?.step(input.engine, { kind: "begin", step: name });
      const began = performance.now();
      const out = await body(input, signal).catch((err: unknown) => {
        const failed = inStep(err, input.engine, name);
        // The reason is the error's class (or a node's access reason): a label of few values.
        const record = toErrorRecord(failed);
        const failure = { reason: record.reason ?? record.name };
        deps.observer?.step(input.engine, { kind: "end", step: name, seconds: secondsSince(began), failure });
        throw failed;
      });
      deps.log.info(`${name} done`, { engine: input.engine, step: name });
      deps.observer?.step(input.engine, { kind: "end", step: name, seconds: secondsSince(began) });
      return out;
    });
  const backendOf = (handle: EngineHandle) => deps.backend(handle.kind);
  // A step on the running engine: its failure is the engine's loss when the engine is gone (engine-gone.ts).
  const running = (input: StepInput, step: Step, signal: AbortSignal): RunningEngine => {
    const handle = need(input.handle, input.engine, step, "engine");
    const run = need(input.run, input.engine, step, "prepared run");
    return { engine: input.engine, step, backend: backendOf(handle), run, handle, secrets: deps.secrets(), signal };
  };
  /**
   * A step's awaited condition: a plain log line (what a pipe shows), and the live view's line. A report
   * of how far the same wait has come is logged at debug only: a pipe reads each wait once.
   */
  const waits = (engine: string, name: Step): ProgressSink => {
    let last: string | null = null;
    return (wait) => {
      if (wait.awaiting === last) deps.log.debug(waitLogLine(wait), { engine, step: name });
      else deps.log.info(waitLogLine(wait), { engine, step: name });
      last = wait.awaiting;
      deps.observer?.step(engine, { kind: "wait", step: name, wait });
    };
  };

  /** `work` holding one of the engine's node's slots; a wait for one is the step's wait. */
  const slotted = <T>(spec: EngineSpec, name: Step, signal: AbortSignal, work: () => Promise<T>): Promise<T> =>
    deps.slots.run(spec.node.name, signal, work, waits(spec.name, name));

  const inspectOn = async (spec: EngineSpec, input: StepInput, signal: AbortSignal) => {
    const imageId = await deps.backend(spec.backend).runtimeIdentity(spec, signal);
    // The engine being replaced still holds its ports; they are not a foreign listener.
    const ignorePorts = input.retiring?.run ? await planPorts(input.retiring.run.dir) : [];
    return inspect(spec, {
      signal,
      imageId,
      ignorePorts,
      host: deps.joinedRuns.access(deps.hosts.access(spec.node.name)),
      manifestCacheDir: deps.hosts.manifestCacheDir(spec.node.name),
      checkpointPeers: () => deps.checkpointPeers(input.engine),
      waits: waits(input.engine, "inspect"),
    });
  };

  return {
    inspect: step("inspect", async (input, signal) => {
      const spec = specFor(input, "inspect");
      return slotted(spec, "inspect", signal, () => inspectOn(spec, input, signal));
    }),
    prepare: step("prepare", async (input) => {
      const spec = specFor(input, "prepare");
      return prepare(spec, need(input.inspection, input.engine, "prepare", "inspection"), {
        stateDir: deps.stateDir,
        app: deps.app,
        existing: input.run,
      });
    }),
    check: step("check", async (input, signal) => {
      const spec = specFor(input, "check");
      const run = need(input.run, input.engine, "check", "prepared run");
      return slotted(spec, "check", signal, () =>
        check(run, {
          backend: deps.backend(spec.backend),
          scriptPath: deps.scriptPath,
          signal,
          launcher: deps.app.launcher,
          waits: waits(input.engine, "check"),
        }),
      );
    }),
    start: step("start", async (input, signal) => {
      const spec = specFor(input, "start");
      return deps.sharedStarts.start(spec, need(input.run, input.engine, "start", "prepared run"), {
        backend: deps.backend(spec.backend),
        signal,
        readySeconds: spec.ready_seconds,
        stopGraceMs: deps.stopGraceMs,
        secrets: deps.secrets(),
        waits: waits(input.engine, "start"),
      });
    }),
    probe: step("probe", async (input, signal) => {
      const on = running(input, "probe", signal);
      return unlessGone(on, () => probe(on.run, { backend: on.backend, handle: on.handle, signal }));
    }),
    capture: step("capture", async (input, signal) => {
      const on = running(input, "capture", signal);
      const { run, backend, handle } = on;
      const inspection = need(input.inspection, input.engine, "capture", "inspection");
      return unlessGone(on, async () => {
        const layout = await capture(run, { backend, handle, groupSignature: inspection.group_signature, signal });
        // The attestation needs the capture: then its sidecar, probed before the engine counts as captured.
        const attestation = await attestAndServe(
          { hosts: deps.hosts, stateDir: deps.stateDir, failpoint: deps.failpoint },
          run,
          { backend, handle },
          signal,
        );
        return attestation ? { ...layout, attestation } : layout;
      });
    }),
    stop: step("stop", async (input) => {
      // A router must stop sending to an engine before it is stopped.
      await deps.servingSettled();
      const told = waits(input.engine, "stop");
      for (const handle of [input.handle, input.retiring?.handle ?? null]) {
        if (!handle) continue;
        told(stopWait(handle, deps.stopGraceMs));
        await stopEngineAndSidecar(backendOf(handle), handle, deps.stopGraceMs, {
          hosts: deps.hosts,
          stateDir: deps.stateDir,
        });
      }
    }),
  };
}
