// A model of the fleet for the rollout property tests: each engine walks the
// engine machine's phases as the machine does (a replaced engine keeps its old
// engine as retiring until the new plan is checked; a change that arrives
// during a step that cannot be abandoned is held; a revert to the retiring
// inputs restores it), and a plan's actions are applied to it: replacements,
// and KV proofs (a prove records the proof's outcome for the instances that run;
// restart-unproven restarts the decode as a new instance). Plain data.
import type { DesiredEngine, Observed, ObservedEngine, ObservedProof, Plan } from "../../src/controller/plan-types.js";
import { pairKey } from "../../src/controller/plan-types.js";
import { failuresInARow } from "../../src/controller/kv-pairs.js";
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
  /** Starts of its engine so far: each start (a replacement, a restart, a crash) is a new instance with a new launch token. */
  starts: number;
  /** Launch tokens of the instances that run and retire now (null: none). */
  token: string | null;
  retiringToken: string | null;
  /** A decode whose first instance fails every transfer proof (stale peer metadata): any new instance cures it. */
  faulty: boolean;
}

/** The proofs the fleet has recorded, keyed by pairKey (what state/narwhal.json `proofs` holds). */
export type ModelProofs = Record<string, ObservedProof>;

/** A new instance of `m` at `d`: one launch token per start, never reused (as narwhal's are). */
function started(m: ModelEngine, d: DesiredEngine): void {
  m.starts++;
  m.token = `tok-${m.name}-${d.input_hash.slice(0, 6)}-${m.starts}`;
}

export function modelEngine(d: DesiredEngine, phase: ModelPhase = "captured"): ModelEngine {
  const runs = phase === "captured" || phase === "started" || phase === "probed";
  const m: ModelEngine = {
    name: d.engine,
    role: d.role,
    phase,
    applied: d,
    running: runs ? d : null,
    retiring: null,
    deferred: null,
    outByRollout: false,
    failsAt: new Set(),
    starts: 0,
    token: null,
    retiringToken: null,
    faulty: false,
  };
  if (runs) started(m, d);
  return m;
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
    Object.assign(m, {
      phase: "captured",
      applied: to,
      running: m.retiring,
      token: m.retiringToken,
      retiring: null,
      retiringToken: null,
      outByRollout: false,
    });
    return;
  }
  if (to.input_hash === m.applied.input_hash) return;
  if (serves(m)) m.outByRollout = true;
  Object.assign(m, {
    retiring: m.running ?? m.retiring,
    retiringToken: m.running ? m.token : m.retiringToken,
    running: null,
    token: null,
    applied: to,
    phase: "pending",
  });
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
      m.retiringToken = null;
      const d = m.deferred;
      m.deferred = null;
      if (d && d.input_hash !== m.applied.input_hash) Object.assign(m, { applied: d, phase: "pending" });
      else m.phase = "checked";
      return;
    }
    case "checked": {
      if (m.failsAt.has(m.applied.input_hash)) {
        Object.assign(m, { phase: "failed", running: null, token: null });
      } else {
        Object.assign(m, { phase: "started", running: m.applied });
        started(m, m.applied);
      }
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

export function observe(
  engines: readonly ModelEngine[],
  serving: Plan["serving"] | null,
  proofs: ModelProofs = {},
): Observed {
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
      handle: m.running ? handleOf(m.name, m.token!) : null,
      liveness: m.running ? "alive" : null,
      problem: null,
      retiring: m.retiring
        ? {
            handle: handleOf(m.name, m.retiringToken!),
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
    serving: serving ? { group_signature: serving.group_signature, engines: serving.engines } : null,
    proofs: structuredClone(proofs),
  };
}

/** A transfer proof of p → d as the instances run now: a faulty decode's first instance fails it. */
function prove(p: ModelEngine, d: ModelEngine, proofs: ModelProofs): void {
  const key = pairKey(p.name, d.name);
  const passed = !(d.faulty && d.starts <= 1);
  const end = (m: ModelEngine) => ({ engine: m.name, launch_token: m.token!, run_dir: null, node: null });
  proofs[key] = {
    prefill: end(p),
    decode: end(d),
    passed,
    cause: passed ? null : "handshake-refused",
    message: passed ? "KV moved" : `${d.name} keeps stale peer metadata of ${p.name}`,
    at: "2026-12-01T12:00:00.000Z",
    source: "proof",
    failures: passed ? 0 : failuresInARow(proofs[key], p.token!),
  };
}

/** A restart of the engine that runs, at the same inputs: a new instance walks the phases from the start. */
export function restart(m: ModelEngine): void {
  Object.assign(m, { phase: "pending", running: null, token: null });
}

/** A crash and a quick restart between two observations: the same inputs, a new instance, still serving. */
export function bump(m: ModelEngine): void {
  if (serves(m)) started(m, m.running!);
}

/** Execute a plan's replaces and proofs on the model (the only actions a rollout of a running fleet produces). */
export function execute(
  engines: readonly ModelEngine[],
  plan: Plan,
  desired: readonly DesiredEngine[],
  proofs: ModelProofs = {},
): void {
  const named = (e: string) => engines.find((m) => m.name === e)!;
  for (const a of plan.actions) {
    if (a.kind === "wait") continue;
    if (a.kind === "prove") {
      const [p, d] = [named(a.prefill), named(a.engine)];
      if (!serves(p) || !serves(d)) throw new Error(`prove of ${a.prefill} → ${a.engine} while one does not serve`);
      prove(p, d, proofs);
      continue;
    }
    if (a.kind === "restart-unproven") {
      restart(named(a.engine));
      continue;
    }
    if (a.kind !== "replace") throw new Error(`unexpected action in a rollout: ${a.kind} ${a.engine}`);
    desiredChanged(
      engines.find((m) => m.name === a.engine)!,
      desired.find((d) => d.engine === a.engine)!,
    );
  }
}
