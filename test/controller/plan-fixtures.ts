// Fixture builders for planner tests: desired engines built from real engine
// specs (hashed as the controller hashes them) and observed engines as plain
// data. Tests start from a converged fleet and change exactly what the case
// under test reads.
import { inputHash, sha256Hex } from "../../src/desired/hash.js";
import type { EngineSpec } from "../../src/desired/types.js";
import { DEFAULT_ROLLOUT } from "../../src/desired/rollout-policy.js";
import { DEFAULT_KV } from "../../src/desired/kv-policy.js";
import { predictedGroupKey } from "../../src/controller/field-diff.js";
import { pairKey } from "../../src/controller/plan-types.js";
import { desiredForPlan } from "../../src/controller/desired-for-plan.js";
import type {
  Action,
  DesiredEngine,
  DesiredForPlan,
  KvPolicy,
  Observed,
  ObservedProof,
  ObservedEngine,
  OwnedObserved,
  Plan,
  PlanPolicy,
  RolloutPolicy,
} from "../../src/controller/plan-types.js";
import type { EngineHandle } from "../../src/phases/types.js";
import { engineSpec, launchRecord, withLaunch, withRuntime } from "../phases/plan-fixtures.js";

/** The spec of engine-<n> with role `role`: its own GPUs and ports, everything else shared by the fleet. */
export function specOf(n: number, role: string): EngineSpec {
  const spec = engineSpec({
    name: `engine-${n}`,
    index: n,
    iid: `n${n}`,
    url: `http://10.0.0.${10 + n}:8000`,
    attestation_url: `http://10.0.0.${10 + n}:8010`,
    host: `10.0.0.${10 + n}`,
    nixl_host: `10.0.0.${10 + n}`,
    launch: launchRecord({ role, gpu_ids: [String(2 * n), String(2 * n + 1)] }),
    role,
  });
  return { ...spec, input_hash: inputHash(spec) };
}

/** The planner's view of a spec (its input hash computed again, for edited specs): desiredForPlan's. */
export function desiredOf(spec: EngineSpec): DesiredEngine {
  const specs = [{ ...spec, input_hash: inputHash(spec) }];
  return desiredForPlan({ specs, rollout: DEFAULT_ROLLOUT, kv: DEFAULT_KV }).engines[0]!;
}

/** A desired edit, re-hashed: e.g. `edit(spec, (s) => withRuntime(s, { extra_args: ["--x"] }))`. */
export function edit(spec: EngineSpec, change: (s: EngineSpec) => EngineSpec): EngineSpec {
  const next = change(spec);
  return { ...next, input_hash: inputHash(next) };
}
export { withLaunch, withRuntime };

/**
 * A compatible edit (the served model name: not a group field) and incompatible ones (the model
 * revision, or extra_args: the runtime record feeds the group signature, seed 000).
 */
export const compatibleEdit = (s: EngineSpec, tag = "x"): EngineSpec =>
  edit(s, (x) => ({ ...x, model: { ...x.model, served_name: `tiny-${tag}` } }));
export const argsEdit = (s: EngineSpec, tag = "x"): EngineSpec =>
  edit(s, (x) => withRuntime(x, { extra_args: [...x.launch.runtime.extra_args, `--tag=${tag}`] }));
export const incompatibleEdit = (s: EngineSpec, revision = "r2"): EngineSpec =>
  edit(s, (x) => ({ ...x, model: { ...x.model, revision } }));

/** The group signature an inspection would compute for these inputs (a stand-in with the same equivalence). */
export function signatureOf(d: DesiredEngine): string {
  let sig = signatures.get(d.input_hash);
  if (sig === undefined) signatures.set(d.input_hash, (sig = sha256Hex(predictedGroupKey(d.inputs)).slice(0, 16)));
  return sig;
}
/** Memo for signatureOf: the property tests ask for the same inputs' signature thousands of times. */
const signatures = new Map<string, string>();

export function handleOf(engine: string, token = `tok-${engine}`): EngineHandle {
  return {
    kind: "native",
    pid: 1000 + Number(engine.replace(/\D/g, "") || 0),
    pgid: 1000,
    boot_id: "boot",
    start_ticks: 1,
    launch_token: token,
  };
}

/** engine `d` captured at its desired inputs, alive, held by an actor. */
export function captured(d: DesiredEngine, over: Partial<ObservedEngine> = {}): ObservedEngine {
  return {
    engine: d.engine,
    role: d.role,
    backend: d.backend,
    phase: "captured",
    applied_hash: d.input_hash,
    applied_inputs: d.inputs,
    running_hash: d.input_hash,
    group_signature: signatureOf(d),
    terminal: false,
    retry_at: null,
    handle: handleOf(d.engine),
    liveness: "alive",
    problem: null,
    retiring: null,
    deferred: null,
    has_actor: true,
    halted: null,
    ...over,
  };
}

/** The engine after its change to `next` was released: replaced, the old engine kept as retiring until the new plan is checked. */
export function released(old: DesiredEngine, next: DesiredEngine, phase = "pending"): ObservedEngine {
  return captured(next, {
    phase,
    running_hash: null,
    handle: null,
    liveness: null,
    retiring: { handle: handleOf(old.engine), hash: old.input_hash, liveness: "alive" },
    group_signature: signatureOf(old),
  });
}

/** A proof of prefill `p` → decode `d` as they run now (their handles' tokens); passed unless `over` says otherwise. */
export function proofOf(p: ObservedEngine, d: ObservedEngine, over: Partial<ObservedProof> = {}): ObservedProof {
  const end = (o: ObservedEngine) => ({
    engine: o.engine,
    launch_token: o.handle?.launch_token ?? "none",
    run_dir: `/state/runs/${o.engine}/r-1`,
    node: null,
  });
  return {
    prefill: end(p),
    decode: end(d),
    passed: true,
    cause: null,
    message: "KV moved: 48 external prompt tokens, 196608 bytes, text equals the local reference",
    at: "2026-12-01T11:59:00.000Z",
    source: "proof",
    failures: 0,
    ...over,
  };
}

/**
 * Passed proofs of every prefill × decode pair running now: a converged fleet is a proven one.
 * Whether a pair may pair at all (group, NIXL hash) is the planner's to judge, not this fixture's.
 */
export function provenPairs(engines: readonly ObservedEngine[]): Record<string, ObservedProof> {
  const running = (role: string) => engines.filter((o) => o.role === role && o.handle !== null);
  return Object.fromEntries(
    running("prefill").flatMap((p) => running("decode").map((d) => [pairKey(p.engine, d.engine), proofOf(p, d)])),
  );
}

/** The observation of `engines`; unless `over.proofs` is given, every pair running now is proven (provenPairs). */
export function observedOf(engines: ObservedEngine[], over: Partial<Observed> = {}): Observed {
  return {
    proofs: provenPairs(engines),
    at: "2026-12-01T12:00:00.000Z",
    engines: Object.fromEntries(engines.map((e) => [e.engine, e])),
    owned: [],
    claimed: engines.flatMap((e) =>
      [e.handle?.launch_token, e.retiring?.handle.launch_token].filter((t): t is string => !!t),
    ),
    serving: null,
    ...over,
  };
}

export function owned(engine: string, token: string, over: Partial<OwnedObserved> = {}): OwnedObserved {
  return {
    engine,
    launch_token: token,
    handle: handleOf(engine, token),
    run_dir: `/state/runs/${engine}/r-${token}`,
    input_hash: null,
    adoptable: true,
    ...over,
  };
}

export function desiredFor(
  engines: DesiredEngine[],
  rollout: RolloutPolicy = DEFAULT_ROLLOUT,
  kv: KvPolicy = DEFAULT_KV,
): DesiredForPlan {
  return { engines, rollout, kv };
}

export const RUNNING: PlanPolicy = { rollout: DEFAULT_ROLLOUT, startup: false };
export const STARTUP: PlanPolicy = { rollout: DEFAULT_ROLLOUT, startup: true };

/** A fleet of `p` prefill and `d` decode engines (engine-1.. prefill first), as specs. */
export function fleetSpecs(p: number, d: number): EngineSpec[] {
  return [
    ...Array.from({ length: p }, (_, i) => specOf(i + 1, "prefill")),
    ...Array.from({ length: d }, (_, i) => specOf(p + i + 1, "decode")),
  ];
}

/** Actions as a KV table reads them: "kind engine", "< prefill" for a proof or a decode restart. */
export const kvKinds = (actions: Action[]): string[] =>
  actions.map((a) => `${a.kind} ${a.engine}${"prefill" in a ? ` < ${a.prefill}` : ""}`);
/** The default KV policy with `over`. */
export const kvWith = (over: Partial<KvPolicy> = {}): KvPolicy => ({ ...DEFAULT_KV, ...over });
/** The engines a plan lists as serving, by name. */
export const servedNames = (p: Plan): string[] => p.serving.engines.map((e) => e.engine);
