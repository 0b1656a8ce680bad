// What a Controller is built from: its configuration, its IO (backends), and
// the hooks tests and tools observe it by; the engines' retry policy, which is
// this controller's configuration, never an engine's history; and the engine
// machine provided with the real phases.
import { untilResumed } from "./resume-gate.js";
import { engineMachine, type RetryPolicy } from "../../machines/engine.js";
import { phaseActors } from "./phase-actors.js";
import { SharedStarts } from "./shared-starts.js";
import { NodeSlots } from "./node-slots.js";
import { JoinedRuns } from "../hosts/joined-runs.js";
import type { EngineActor } from "./engine-actors.js";
import type { EngineSpec } from "../desired/types.js";
import type { EngineBackend } from "../backends/types.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import type { AppIdentity } from "../phases/plan.js";
import type { Inspection } from "../phases/types.js";
import type { Failpoint } from "../failpoints.js";
import type { NodeHosts } from "../hosts/node-hosts.js";
import type { ServingFleet } from "./plan-types.js";
import type { CheckpointObservation } from "../phases/checkpoint-agreement.js";
import type { ControllerObserver } from "./observer.js";

export interface ControllerHooks {
  /** After a transition is persisted. */
  transition?(engine: string, from: string, to: string): void;
  /** After state/serving-fleet.json was written. */
  serving?(fleet: ServingFleet): void;
}

export interface ControllerOptions {
  config: Config;
  log: Logger;
  app: AppIdentity;
  scriptPath: string;
  backends: Record<EngineSpec["backend"], EngineBackend>;
  /** The nodes the backends reach (the same NodeHosts): host-side steps run on the engine's node; closed with the controller. */
  hosts: NodeHosts;
  failpoint?: Failpoint;
  /**
   * "watch" (default) outwaits a cause outside narwhal's control for as long as it lasts;
   * "once" (reconcile --once) for config.retry.onceOutwaitMs, so a CI run ends.
   */
  mode?: "once" | "watch";
  hooks?: ControllerHooks;
  /** Most queue keys worked on at once (default config.queue.concurrency). */
  concurrency?: number;
  /** Told of transitions, steps (with their waits), proofs, reconciles and state writes: metrics and the live view (fanOut). */
  observer?: ControllerObserver;
}

/** The engines' retry policy for this controller: its configuration, not history. */
export function retryPolicy(config: Config, mode: ControllerOptions["mode"] = "watch"): RetryPolicy {
  const { baseMs, capMs, maxAttempts, onceOutwaitMs } = config.retry;
  // Outwaited causes are re-checked at most a resync period apart: as often as drift is.
  return {
    baseMs,
    capMs,
    maxAttempts,
    outwaitCapMs: config.watch.resyncMs,
    outwaitForMs: mode === "once" ? onceOutwaitMs : null,
  };
}

/** What the phase actors need from the controller that runs them. */
export interface MachineAccess {
  /** The spec each engine's actor was last given. */
  applied: ReadonlyMap<string, EngineSpec>;
  actors: ReadonlyMap<string, EngineActor>;
  persisted(): Promise<void>;
  servingSettled(): Promise<void>;
  secrets(): string[];
}

/** The engine machine with its IO: the real phases, reaching the controller only through `access`. */
export function providedMachine(opts: ControllerOptions, access: MachineAccess) {
  // One set of slots for the controller: every engine of a node draws on the same bound.
  const slots = new NodeSlots(opts.config.queue.nodeConcurrency);
  return engineMachine.provide({
    actors: phaseActors({
      stateDir: opts.config.stateDir,
      app: opts.app,
      scriptPath: opts.scriptPath,
      stopGraceMs: opts.config.stopGraceMs,
      log: opts.log,
      spec: (engine) => access.applied.get(engine),
      backend: (kind) => opts.backends[kind],
      hosts: opts.hosts,
      ...(opts.failpoint ? { failpoint: opts.failpoint } : {}),
      ...(opts.observer ? { observer: opts.observer } : {}),
      persisted: () => access.persisted(),
      suspension: {
        suspended: (engine) => access.actors.get(engine)?.getSnapshot().context.suspended === true,
        untilResumed: (engine, signal) => untilResumed(access.actors.get(engine), signal),
      },
      servingSettled: () => access.servingSettled(),
      secrets: () => access.secrets(),
      checkpointPeers: (engine) => checkpointPeers(access.actors, engine),
      joinedRuns: new JoinedRuns(),
      slots,
      sharedStarts: new SharedStarts({
        slots,
        specs: () => [...access.applied.values()],
        running: (engine) => access.actors.get(engine)?.getSnapshot().context.handle != null,
        log: opts.log,
        waitMs: opts.config.sharedStartWaitMs,
        host: (node) => opts.hosts.access(node),
      }),
    }),
  });
}

/**
 * What every other engine's recorded inspection observed of its checkpoint: the controller holds them
 * all, so the comparison across nodes (phases/checkpoint-agreement.ts) needs no IO.
 */
function checkpointPeers(actors: ReadonlyMap<string, EngineActor>, engine: string): CheckpointObservation[] {
  const peers: CheckpointObservation[] = [];
  for (const [name, actor] of actors) {
    const i = actor.getSnapshot().context.inspection;
    // An inspection recorded before manifests existed has none: nothing to compare.
    const manifest = i?.model_manifest as Inspection["model_manifest"] | undefined;
    if (name === engine || !i || !manifest) continue;
    peers.push({
      engine: name,
      node: i.node,
      model_dir: manifest.model_dir,
      config_sha256: i.model_config_sha256,
      tree_sha256: manifest.tree_sha256,
    });
  }
  return peers;
}
