// The engine machine's scripted world: the actors are plain functions over a
// small in-memory host that records every call, so each test can assert what
// was done, in which order, with which inputs. Shared by the machine's tests.
import { createActor, fromPromise, waitFor, type InspectionEvent, type Snapshot } from "xstate";
import { engineMachine, isSettled, type RetryPolicy, type StepInput } from "../../machines/engine.js";
import { PhaseError, type FailureClass, type Step } from "../../src/errors.js";
import type {
  CacheLayout,
  CheckResult,
  EngineHandle,
  Inspection,
  PreparedRun,
  ProbeResult,
} from "../../src/phases/types.js";

export interface World {
  /** Every step called, with when (epoch ms: a retry's call is checked against its backoff deadline). */
  calls: Array<{ step: string; input: StepInput; at?: number }>;
  /** Failures to raise, consumed in order, per step: a PhaseError of that class, or the error value itself. */
  failures: Partial<Record<Step, Array<{ retryable?: boolean; failure?: FailureClass } | Error>>>;
  runs: number;
}

export function world(failures: World["failures"] = {}): World {
  return { calls: [], failures, runs: 0 };
}

export function actors(w: World) {
  const step = <T>(name: Step, out: (input: StepInput) => T) =>
    fromPromise<T, StepInput>(async ({ input }) => {
      w.calls.push({ step: name, input, at: Date.now() });
      const f = w.failures[name]?.shift();
      if (f instanceof Error) throw f;
      if (f) throw new PhaseError(input.engine, name, `${name} broke`, f);
      return out(input);
    });
  return {
    inspect: step("inspect", (i) => ({ engine: i.engine, group_signature: "0123456789abcdef" }) as Inspection),
    prepare: step("prepare", (i): PreparedRun => ({
      engine: i.engine,
      dir: `/runs/${++w.runs}`,
      input_hash: i.desiredHash,
      plan_sha256: "p",
      launch_token: `t${w.runs}`,
    })),
    check: step("check", () => ({ plan_sha256: "p", vllm_api_version: "0.11.0" }) as CheckResult),
    start: step("start", (i): EngineHandle => ({
      kind: "native",
      pid: 100 + w.runs,
      pgid: 100 + w.runs,
      boot_id: "b",
      start_ticks: 1,
      launch_token: i.run!.launch_token,
    })),
    probe: step("probe", () => ({}) as ProbeResult),
    capture: step("capture", () => ({ block_size: 16 }) as CacheLayout),
    stop: step<void>("stop", () => undefined),
  };
}

export const retry = { baseMs: 5, capMs: 20, maxAttempts: 3 };

/** `inspect` sees every event the actor processes (a backoff timer's firing among them). */
export function spawnEngine(
  w: World,
  snapshot?: Snapshot<unknown>,
  policy: RetryPolicy = retry,
  inspect?: (event: InspectionEvent) => void,
) {
  const machine = engineMachine.provide({ actors: actors(w) });
  const input = { engine: "engine-1", desiredHash: "h1", retry: policy };
  const actor = createActor(machine, { input, ...(snapshot ? { snapshot } : {}), ...(inspect ? { inspect } : {}) });
  actor.start();
  return actor;
}

export const settled = (a: ReturnType<typeof spawnEngine>) =>
  waitFor(a, (s) => isSettled(String(s.value), s.context), { timeout: 5000 });
export const steps = (w: World) => w.calls.map((c) => c.step);
