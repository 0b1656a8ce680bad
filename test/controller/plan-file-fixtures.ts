// Builders of the data a saved plan is made of (DesiredForPlan, Observed, Plan), as plain values:
// a converged two-engine fleet by default, with one knob per difference a test makes.
import { DEFAULT_KV } from "../../src/desired/kv-policy.js";
import type {
  DesiredEngine,
  DesiredForPlan,
  Observed,
  ObservedEngine,
  Plan,
  RolloutPolicy,
} from "../../src/controller/plan-types.js";
import type { EngineHandle } from "../../src/phases/types.js";
import { savedPlan, type SavedPlan } from "../../src/controller/plan-file.js";

export const hashOf = (c: string): string => c.repeat(64).slice(0, 64);

export const ROLLOUT: RolloutPolicy = { max_unavailable: {}, default_max_unavailable: 1, incompatible: "pd_units" };

export function desiredEngine(n: number, over: Partial<DesiredEngine> = {}): DesiredEngine {
  return {
    engine: `engine-${n}`,
    role: n % 2 === 1 ? "prefill" : "decode",
    backend: "native",
    iid: `n${n}`,
    url: `http://127.0.0.1:${18100 + n}`,
    attestation_url: `http://127.0.0.1:${18200 + n}`,
    input_hash: hashOf(String(n)),
    inputs: { launch: { runtime: { extra_args: [] } } },
    ...over,
  };
}

export function desired(
  engines: DesiredEngine[] = [desiredEngine(1), desiredEngine(2)],
  rollout: RolloutPolicy = ROLLOUT,
): DesiredForPlan {
  return { engines, rollout, kv: DEFAULT_KV };
}

export function nativeHandle(token: string, pid = 4000): EngineHandle {
  return { kind: "native", pid, pgid: pid, boot_id: "boot-1", start_ticks: 1234, launch_token: token };
}

export function observedEngine(n: number, over: Partial<ObservedEngine> = {}): ObservedEngine {
  const hash = hashOf(String(n));
  return {
    engine: `engine-${n}`,
    role: n % 2 === 1 ? "prefill" : "decode",
    backend: "native",
    phase: "captured",
    applied_hash: hash,
    applied_inputs: { launch: { runtime: { extra_args: [] } } },
    running_hash: hash,
    group_signature: "0123456789abcdef",
    terminal: false,
    retry_at: null,
    handle: nativeHandle(`token-${n}-${"a".repeat(20)}`, 4000 + n),
    liveness: "alive",
    problem: null,
    retiring: null,
    deferred: null,
    has_actor: false,
    halted: null,
    ...over,
  };
}

export function observed(
  engines: ObservedEngine[] = [observedEngine(1), observedEngine(2)],
  at = "2026-12-01T12:00:00.000Z",
): Observed {
  return {
    at,
    engines: Object.fromEntries(engines.map((e) => [e.engine, e])),
    owned: engines
      .filter((e) => e.handle)
      .map((e) => ({
        engine: e.engine,
        launch_token: e.handle!.launch_token,
        handle: e.handle!,
        run_dir: `/state/runs/${e.engine}/r1`,
        input_hash: e.running_hash,
        adoptable: true,
      })),
    claimed: engines.filter((e) => e.handle).map((e) => e.handle!.launch_token),
    serving: null,
  };
}

export const NO_CHANGES: Plan = {
  actions: [],
  rollout: [],
  halted: [],
  serving: {
    group_signature: "0123456789abcdef",
    engines: [1, 2].map((n) => ({
      iid: `n${n}`,
      url: `http://127.0.0.1:${18100 + n}`,
      attestation_url: `http://127.0.0.1:${18200 + n}`,
      role: n === 1 ? "prefill" : "decode",
      engine: `engine-${n}`,
      group_signature: "0123456789abcdef",
    })),
  },
  warnings: [],
  changes: false,
};

/** engine-1's extra_args edited: one replacement released now; every action kind appears in `everyAction`. */
export const REPLACE_ENGINE_1: Plan = {
  ...NO_CHANGES,
  actions: [
    {
      kind: "replace",
      engine: "engine-1",
      role: "prefill",
      from_hash: hashOf("1"),
      to_hash: hashOf("9"),
      fields: [
        { path: "launch.runtime.extra_args[2]", old: "--max-num-seqs=8", new: "--max-num-seqs=16", group: false },
      ],
      group_changes: false,
      reason: "desired inputs changed",
    },
  ],
  rollout: [{ engines: ["engine-1"], incompatible: false, status: "now" }],
  changes: true,
};

export const EVERY_ACTION: Plan = {
  ...NO_CHANGES,
  actions: [
    ...REPLACE_ENGINE_1.actions,
    { kind: "create", engine: "engine-3", role: "prefill", reason: "desired, not in the state" },
    { kind: "remove", engine: "engine-4", reason: "no longer desired" },
    { kind: "restart-lost", engine: "engine-5", reason: "its process is gone" },
    {
      kind: "retry",
      engine: "engine-6",
      reason: "terminally failed; a new controller run gives a fresh attempt budget",
    },
    { kind: "adopt", engine: "engine-7", launch_token: "tok-7-bbbbbbbbbbbbbbbb", reason: "runs with no usable record" },
    {
      kind: "sweep-orphan",
      engine: "engine-8",
      launch_token: "tok-8-cccccccccccccccc",
      handle: nativeHandle("tok-8-cccccccccccccccc", 4008),
      reason: "claimed by no record",
    },
    { kind: "forget-retiring", engine: "engine-9", reason: "the retiring engine is gone" },
    {
      kind: "restart-unproven",
      engine: "engine-10",
      prefill: "engine-3",
      reason: "its transfer proof with engine-3 failed (transfer-failed: 1 failed transfer)",
    },
    {
      kind: "prove",
      engine: "engine-12",
      prefill: "engine-11",
      reason: "first transfer proof of engine-11 → engine-12",
    },
    { kind: "wait", engine: "engine-2", why: "the rollout holds it until engine-1 converges", until: "rollout" },
  ],
  rollout: [
    { engines: ["engine-1"], incompatible: false, status: "now" },
    { engines: ["engine-2"], incompatible: false, status: "later" },
  ],
  changes: true,
};

/** A saved plan of the converged fleet (by default: engine-1's replacement), made at a fixed time. */
export const base = (plan: Plan = REPLACE_ENGINE_1): SavedPlan =>
  savedPlan({
    desired: desired(),
    observed: observed(),
    plan,
    desiredDir: "/fleet/desired",
    stateDir: "/fleet/state",
    at: new Date("2026-12-01T12:00:00Z"),
  });
