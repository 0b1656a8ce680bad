// A model of the fleet for the rollout property tests: each engine walks the
// engine machine's phases as the machine does (a replaced engine keeps its old
// engine as retiring until the new plan is checked; a change that arrives
// during a step that cannot be abandoned is held; a revert to the retiring
// inputs restores it), and a plan's actions are applied to it. Plain data.
import type { DesiredEngine, Observed, ObservedEngine, Plan } from "../../src/controller/plan-types.js";
import { handleOf, signatureOf } from "./plan-fixtures.js";

const WORKING = ["pending", "inspected", "prepared", "replacing", "checked", "started", "probed"] as const;
export type ModelPhase = (typeof WORKING)[number] | "captured" | "failed";

export interface ModelEngine {
  name: string;
  role: string;
  phase: ModelPhase;
  applied: DesiredEngine;
  /** What the engine's live process runs (started, probed, captured). */
  running: DesiredEngine | null;
  retiring: DesiredEngine | null;
  deferred: DesiredEngine | null;
  /** Taken out of service by a released change (it was serving), until captured again. */
  outByRollout: boolean;
  /** Input hashes at which this engine's start fails (a bad replacement). */
  failsAt: Set<string>;
}

export function modelEngine(d: DesiredEngine, phase: ModelPhase = "captured"): ModelEngine {
  const runs = phase === "captured" || phase === "started" || phase === "probed";
  return {
    name: d.engine,
    role: d.role,
    phase,
    applied: d,
    running: runs ? d : null,
    retiring: null,
    deferred: null,
    outByRollout: false,
    failsAt: new Set(),
  };
}

export const serves = (m: ModelEngine): boolean => m.phase === "captured" && m.retiring === null && m.running !== null;

/** DESIRED_CHANGED, as the engine machine takes it. */
export function desiredChanged(m: ModelEngine, to: DesiredEngine): void {
  if (m.phase === "checked" || m.phase === "replacing") {
    m.deferred = to;
    return;
  }
  if (
    m.retiring &&
    m.retiring.input_hash === to.input_hash &&
    ["pending", "inspected", "prepared", "failed"].includes(m.phase)
  ) {
    Object.assign(m, { phase: "captured", applied: to, running: m.retiring, retiring: null, outByRollout: false });
    return;
  }
  if (to.input_hash === m.applied.input_hash) return;
  if (serves(m)) m.outByRollout = true;
  Object.assign(m, { retiring: m.running ?? m.retiring, running: null, applied: to, phase: "pending" });
}

/** One engine one phase further. */
export function advance(m: ModelEngine): void {
  switch (m.phase) {
    case "pending":
      m.phase = "inspected";
      return;
    case "inspected":
      m.phase = "prepared";
      return;
    case "prepared":
      m.phase = m.retiring ? "replacing" : "checked";
      return;
    case "replacing": {
      m.retiring = null;
      const d = m.deferred;
      m.deferred = null;
      if (d && d.input_hash !== m.applied.input_hash) Object.assign(m, { applied: d, phase: "pending" });
      else m.phase = "checked";
      return;
    }
    case "checked": {
      if (m.failsAt.has(m.applied.input_hash)) {
        Object.assign(m, { phase: "failed", running: null });
      } else Object.assign(m, { phase: "started", running: m.applied });
      const d = m.deferred;
      m.deferred = null;
      if (d) desiredChanged(m, d);
      return;
    }
    case "started":
      m.phase = "probed";
      return;
    case "probed":
      Object.assign(m, { phase: "captured", outByRollout: false });
      return;
    default:
      return;
  }
}

export const advanceable = (m: ModelEngine): boolean => m.phase !== "captured" && m.phase !== "failed";

export function observe(engines: readonly ModelEngine[], serving: Plan["serving"] | null): Observed {
  const obs: Record<string, ObservedEngine> = {};
  for (const m of engines) {
    obs[m.name] = {
      engine: m.name,
      role: m.role,
      backend: m.applied.backend,
      phase: m.phase,
      applied_hash: m.applied.input_hash,
      applied_inputs: m.applied.inputs,
      running_hash: m.running?.input_hash ?? null,
      group_signature: signatureOf(m.running ?? m.applied),
      terminal: m.phase === "failed",
      retry_at: null,
      handle: m.running ? handleOf(m.name, `tok-${m.name}-${m.running.input_hash.slice(0, 6)}`) : null,
      liveness: m.running ? "alive" : null,
      problem: null,
      retiring: m.retiring
        ? {
            handle: handleOf(m.name, `tok-${m.name}-${m.retiring.input_hash.slice(0, 6)}`),
            hash: m.retiring.input_hash,
            liveness: "alive",
          }
        : null,
      deferred: m.deferred ? { desiredHash: m.deferred.input_hash } : null,
      has_actor: true,
      halted: null,
    };
  }
  const claimed = Object.values(obs).flatMap((o) =>
    [o.handle?.launch_token, o.retiring?.handle.launch_token].filter((t): t is string => !!t),
  );
  return {
    at: "2026-12-01T12:00:00.000Z",
    engines: obs,
    owned: [],
    claimed,
    serving: serving ? { group_signature: serving.group_signature, engines: serving.engines, pairs: serving.pairs } : null,
    proofs: {},
  };
}

/** Execute a plan's replaces on the model (the only action a rollout of a running fleet produces). */
export function execute(engines: readonly ModelEngine[], plan: Plan, desired: readonly DesiredEngine[]): void {
  for (const a of plan.actions) {
    if (a.kind === "wait") continue;
    if (a.kind !== "replace") throw new Error(`unexpected action in a rollout: ${a.kind} ${a.engine}`);
    desiredChanged(
      engines.find((m) => m.name === a.engine)!,
      desired.find((d) => d.engine === a.engine)!,
    );
  }
}
