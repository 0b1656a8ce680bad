// Simulated rollouts for the property tests: random fleets, starting states,
// edits, KV proofs as recorded (current, stale, failed, found by the scrape),
// faulty decodes and prefill restarts; the planner plans, the model
// (rollout-model.ts) executes, one engine moves one phase, until nothing moves.
import fc from "fast-check";
import { expect } from "vitest";
import { plan } from "../../src/controller/planner.js";
import { isPairedRole } from "../../src/controller/serving-fleet.js";
import { pairKey } from "../../src/controller/plan-types.js";
import type { DesiredEngine, KvPolicy, Observed, Plan, RolloutPolicy } from "../../src/controller/plan-types.js";
import { compatibleEdit, desiredFor, desiredOf, incompatibleEdit, RUNNING, specOf } from "./plan-fixtures.js";
import {
  advance,
  advanceable,
  execute,
  modelEngine,
  observe,
  bump,
  type ModelEngine,
  type ModelPhase,
  type ModelProofs,
} from "./rollout-model.js";

const unavailable = fc.oneof(fc.constantFrom(1, 2, 3), fc.constantFrom("25%", "50%", "100%"));
export const policyArb = fc.record({
  max_unavailable: fc.record({ prefill: unavailable, decode: unavailable }, { requiredKeys: [] }),
  default_max_unavailable: unavailable,
  incompatible: fc.constantFrom<RolloutPolicy["incompatible"]>("pd_units", "pd_units", "recreate"),
});
/** Policies under which every pair is proven in the end: a failed proof restarts the decode (a faulty one is cured by one). */
export const kvArb: fc.Arbitrary<KvPolicy> = fc.record({
  prove: fc.constantFrom(true, true, true, false),
  on_failure: fc.constant<KvPolicy["on_failure"]>("restart_decode"),
  on_prefill_restart: fc.constantFrom<KvPolicy["on_prefill_restart"]>("reprove", "restart_decodes"),
  max_decode_restarts: fc.integer({ min: 1, max: 2 }),
  watch_interval_s: fc.constant(30),
});
export type Edit = "none" | "compatible" | "incompatible" | "both";
const editArb = fc.constantFrom<Edit>("none", "compatible", "incompatible", "both");
const startArb = fc.constantFrom<ModelPhase>("captured", "captured", "captured", "probed", "pending");
/** What state/narwhal.json holds for a pair of the starting fleet. */
export type InitialProof = "passed" | "stale" | "failed" | "watch" | "none";
const initialArb = fc.constantFrom<InitialProof>("passed", "passed", "stale", "failed", "watch", "none");

function editOf(n: number, role: string, e: Edit, version: string): DesiredEngine {
  let s = specOf(n, role);
  if (e === "compatible" || e === "both") s = compatibleEdit(s, version);
  if (e === "incompatible" || e === "both") s = incompatibleEdit(s, `r-${version}`);
  return desiredOf(s);
}

export interface Scenario {
  roles: string[];
  starts: ModelPhase[];
  first: Edit[];
  /** A second edit of every engine at step `at` (e.g. a revert): null = none. */
  second: { at: number; edits: Array<Edit | "revert"> } | null;
  failing: boolean[];
  policy: RolloutPolicy;
  kv: KvPolicy;
  /** Per prefill × decode pair of the starting fleet (in name order), what proof is recorded. */
  proofs: InitialProof[];
  /** Decodes whose first instance fails every proof. */
  faulty: boolean[];
  /** Engines that restart (a new instance at the same inputs) at a step, if serving then. */
  bumps: Array<{ at: number; engine: number }>;
  picks: number[];
}

export interface Run {
  plans: Plan[];
  final: { plan: Plan; engines: ModelEngine[]; desired: DesiredEngine[] };
}

export type Check = (p: Plan, engines: ModelEngine[], desired: DesiredEngine[], observed: Observed) => void;

/** The recorded proofs of the starting fleet, as the scenario says. */
function startingProofs(sc: Scenario, engines: ModelEngine[]): ModelProofs {
  const proofs: ModelProofs = {};
  const of = (role: string) => engines.filter((m) => m.role === role && m.running);
  let i = 0;
  for (const p of of("prefill"))
    for (const d of of("decode")) {
      const kind = sc.proofs[i++ % sc.proofs.length]!;
      if (kind === "none") continue;
      const end = (m: ModelEngine, token = m.token!) => ({
        engine: m.name,
        launch_token: token,
        run_dir: null,
        node: null,
      });
      const failed = kind === "failed" || kind === "watch";
      proofs[pairKey(p.name, d.name)] = {
        prefill: kind === "stale" ? end(p, `tok-${p.name}-before`) : end(p),
        decode: end(d),
        passed: !failed,
        cause: failed ? "silent-recompute" : null,
        message: failed ? "external_kv_transfer flat while local_compute grew" : "KV moved",
        at: "2026-12-01T11:00:00.000Z",
        source: kind === "watch" ? "watch" : "proof",
        failures: kind === "failed" ? 1 : 0,
      };
    }
  return proofs;
}

/** Plan, execute, check, move one engine, until nothing moves (or `steps` pass, with settle false). */
export function simulate(sc: Scenario, check: Check, opts: { settle?: boolean; steps?: number } = {}): Run {
  const old = sc.roles.map((r, i) => desiredOf(specOf(i + 1, r)));
  const first = sc.roles.map((r, i) => editOf(i + 1, r, sc.first[i]!, "v1"));
  const second =
    sc.second &&
    sc.roles.map((r, i) =>
      sc.second!.edits[i] === "revert" ? old[i]! : editOf(i + 1, r, sc.second!.edits[i] as Edit, "v2"),
    );
  const engines = old.map((d, i) => modelEngine(d, sc.starts[i]));
  engines.forEach((m, i) => sc.failing[i] && m.failsAt.add(first[i]!.input_hash));
  engines.forEach((m, i) => (m.faulty = m.role === "decode" && sc.faulty[i] === true));
  const proofs = startingProofs(sc, engines);
  const plans: Plan[] = [];
  let serving: Plan["serving"] | null = null;
  const steps = opts.steps ?? 400;
  for (let step = 0; step < steps; step++) {
    const desired = second && step >= sc.second!.at ? second : first;
    for (const b of sc.bumps) {
      const m = engines[b.engine % engines.length]!;
      if (b.at === step) bump(m);
    }
    const observed = observe(engines, serving, proofs);
    const p = plan(desiredFor(desired, sc.policy, sc.kv), observed, RUNNING);
    plans.push(p);
    execute(engines, p, desired, proofs);
    serving = p.serving;
    check(p, engines, desired, observed);
    const movable = engines.filter(advanceable);
    const acts = p.actions.some((a) => a.kind !== "wait");
    if (movable.length === 0 && !acts) return { plans, final: { plan: p, engines, desired } };
    if (movable.length) advance(movable[sc.picks[step % sc.picks.length]! % movable.length]!);
  }
  if (opts.settle === false) return { plans, final: { plan: plans.at(-1)!, engines, desired: first } };
  throw new Error(`the rollout did not settle in ${steps} steps`);
}

export interface ScenarioOptions {
  minP?: number;
  minD?: number;
  edits?: fc.Arbitrary<Edit>;
  starts?: fc.Arbitrary<ModelPhase>;
  failures?: boolean;
  second?: boolean;
  policy?: fc.Arbitrary<RolloutPolicy>;
  kv?: fc.Arbitrary<KvPolicy>;
  /** Faulty decodes and prefill restarts (default true). */
  kvFaults?: boolean;
  /** The proofs recorded for the starting fleet (default: any of passed, stale, failed, found by the scrape, none). */
  initial?: fc.Arbitrary<InitialProof>;
}

export const scenarioArb = (opts: ScenarioOptions = {}): fc.Arbitrary<Scenario> =>
  fc
    .tuple(
      fc.integer({ min: opts.minP ?? 1, max: 4 }),
      fc.integer({ min: opts.minD ?? 1, max: 4 }),
      fc.integer({ min: 0, max: 1 }),
    )
    .chain(([p, d, other]) => {
      const n = p + d + other;
      const roles = [
        ...Array<string>(p).fill("prefill"),
        ...Array<string>(d).fill("decode"),
        ...Array<string>(other).fill("embed"),
      ];
      const faults = opts.kvFaults !== false;
      return fc.record({
        roles: fc.constant(roles),
        starts: fc.array(opts.starts ?? startArb, { minLength: n, maxLength: n }),
        first: fc.array(opts.edits ?? editArb, { minLength: n, maxLength: n }),
        second:
          opts.second === false
            ? fc.constant(null)
            : fc.option(
                fc.record({
                  at: fc.nat(30),
                  edits: fc.array(fc.oneof(editArb, fc.constant<"revert">("revert")), { minLength: n, maxLength: n }),
                }),
              ),
        failing: opts.failures
          ? fc.array(fc.boolean(), { minLength: n, maxLength: n })
          : fc.constant(Array<boolean>(n).fill(false)),
        policy: opts.policy ?? policyArb,
        kv: opts.kv ?? kvArb,
        proofs: fc.array(opts.initial ?? initialArb, { minLength: 1, maxLength: 16 }),
        faulty: faults
          ? fc.array(fc.boolean(), { minLength: n, maxLength: n })
          : fc.constant(Array<boolean>(n).fill(false)),
        bumps: faults
          ? fc.array(fc.record({ at: fc.nat(40), engine: fc.nat(n - 1) }), { maxLength: 2 })
          : fc.constant([]),
        picks: fc.array(fc.nat(), { minLength: 1, maxLength: 64 }),
      });
    });

/**
 * (e) the serving fleet never lists an unproven pair: with proofs on, every listed prefill × listed
 * decode has a passed proof of the instances that ran when the plan was made; `pairs` is exactly
 * those; with proofs off, `pairs` is every listed prefill × decode.
 */
export function checkProven(p: Plan, kv: KvPolicy, observed: Observed): void {
  const of = (role: string) => p.serving.engines.filter((e) => e.role === role).map((e) => e.engine);
  const expected = of("prefill").flatMap((prefill) => of("decode").map((decode) => ({ prefill, decode })));
  expect(p.serving.pairs).toEqual(expected);
  if (!kv.prove) return;
  for (const { prefill, decode } of expected) {
    const proof = observed.proofs?.[pairKey(prefill, decode)];
    const token = (e: string) => observed.engines[e]?.handle?.launch_token;
    expect(proof?.passed, `${prefill} → ${decode} listed without a passed proof`).toBe(true);
    expect(proof?.prefill.launch_token, `${prefill} → ${decode}: proof of another prefill instance`).toBe(
      token(prefill),
    );
    expect(proof?.decode.launch_token, `${prefill} → ${decode}: proof of another decode instance`).toBe(token(decode));
  }
  expect(p.serving.engines.filter((e) => isPairedRole(e.role)).length === 0 || expected.length > 0).toBe(true);
}
