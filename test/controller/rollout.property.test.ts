// Property tests of the rollout guarantees over random fleets, random starting
// states and random edits: a model of the fleet (rollout-model.ts) executes
// each plan, one engine moves one phase, the planner plans again, until
// nothing moves. Checked at every step: (a) no role has more engines out of
// service because of the rollout than max_unavailable allows; (b) the serving
// fleet lists only captured engines and one group among prefill/decode;
// (c) a fleet-wide incompatible change on >= 2P+2D keeps a compatible pair
// serving throughout; (d) a failed replacement releases nothing further.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { plan } from "../../src/controller/planner.js";
import { maxUnavailable } from "../../src/controller/rollout.js";
import { isPairedRole } from "../../src/controller/serving-fleet.js";
import type { DesiredEngine, Plan, RolloutPolicy } from "../../src/controller/plan-types.js";
import {
  compatibleEdit,
  desiredFor,
  desiredOf,
  incompatibleEdit,
  RUNNING,
  signatureOf,
  specOf,
} from "./plan-fixtures.js";
import {
  advance,
  advanceable,
  execute,
  modelEngine,
  observe,
  serves,
  type ModelEngine,
  type ModelPhase,
} from "./rollout-model.js";

const unavailable = fc.oneof(fc.constantFrom(1, 2, 3), fc.constantFrom("25%", "50%", "100%"));
const policyArb = fc.record({
  max_unavailable: fc.record({ prefill: unavailable, decode: unavailable }, { requiredKeys: [] }),
  default_max_unavailable: unavailable,
  incompatible: fc.constantFrom<RolloutPolicy["incompatible"]>("pd_units", "pd_units", "recreate"),
});
type Edit = "none" | "compatible" | "incompatible" | "both";
const editArb = fc.constantFrom<Edit>("none", "compatible", "incompatible", "both");
const startArb = fc.constantFrom<ModelPhase>("captured", "captured", "captured", "probed", "pending");

function editOf(n: number, role: string, e: Edit, version: string): DesiredEngine {
  let s = specOf(n, role);
  if (e === "compatible" || e === "both") s = compatibleEdit(s, version);
  if (e === "incompatible" || e === "both") s = incompatibleEdit(s, `r-${version}`);
  return desiredOf(s);
}

interface Scenario {
  roles: string[];
  starts: ModelPhase[];
  first: Edit[];
  /** A second edit of every engine at step `at` (e.g. a revert): null = none. */
  second: { at: number; edits: Array<Edit | "revert"> } | null;
  failing: boolean[];
  policy: RolloutPolicy;
  picks: number[];
}

interface Run {
  plans: Plan[];
  final: { plan: Plan; engines: ModelEngine[]; desired: DesiredEngine[] };
}

/** Plan, execute, check, move one engine, until nothing moves; `check` sees every step after its plan was executed. */
function simulate(sc: Scenario, check: (p: Plan, engines: ModelEngine[], desired: DesiredEngine[]) => void): Run {
  const old = sc.roles.map((r, i) => desiredOf(specOf(i + 1, r)));
  const first = sc.roles.map((r, i) => editOf(i + 1, r, sc.first[i]!, "v1"));
  const second =
    sc.second &&
    sc.roles.map((r, i) =>
      sc.second!.edits[i] === "revert" ? old[i]! : editOf(i + 1, r, sc.second!.edits[i] as Edit, "v2"),
    );
  const engines = old.map((d, i) => modelEngine(d, sc.starts[i]));
  engines.forEach((m, i) => sc.failing[i] && m.failsAt.add(first[i]!.input_hash));
  const plans: Plan[] = [];
  let serving: Plan["serving"] | null = null;
  for (let step = 0; step < 400; step++) {
    const desired = second && step >= sc.second!.at ? second : first;
    const p = plan(desiredFor(desired, sc.policy), observe(engines, serving), RUNNING);
    plans.push(p);
    execute(engines, p, desired);
    serving = p.serving;
    check(p, engines, desired);
    const movable = engines.filter(advanceable);
    if (movable.length === 0 && !p.actions.some((a) => a.kind === "replace"))
      return { plans, final: { plan: p, engines, desired } };
    if (movable.length) advance(movable[sc.picks[step % sc.picks.length]! % movable.length]!);
  }
  throw new Error("the rollout did not settle in 400 steps");
}

const scenarioArb = (
  opts: {
    minP?: number;
    minD?: number;
    edits?: fc.Arbitrary<Edit>;
    starts?: fc.Arbitrary<ModelPhase>;
    failures?: boolean;
    second?: boolean;
    policy?: fc.Arbitrary<RolloutPolicy>;
  } = {},
) =>
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
        picks: fc.array(fc.nat(), { minLength: 1, maxLength: 64 }),
      });
    });

/** (b): captured engines only, one group among prefill and decode, each listed with the signature it runs. */
function checkServing(p: Plan, engines: ModelEngine[]): void {
  for (const e of p.serving.engines) {
    const m = engines.find((x) => x.name === e.engine)!;
    expect(serves(m), `${e.engine} listed while ${m.phase}`).toBe(true);
    expect(e.group_signature).toBe(signatureOf(m.running!));
  }
  const groups = new Set(p.serving.engines.filter((e) => isPairedRole(e.role)).map((e) => e.group_signature));
  expect(groups.size, "prefill/decode of one group only").toBeLessThanOrEqual(1);
}

/** (a): engines taken out of service by the rollout, per role, within max_unavailable. */
function checkBudget(policy: RolloutPolicy, engines: ModelEngine[]): void {
  for (const role of new Set(engines.map((m) => m.role))) {
    const ofRole = engines.filter((m) => m.role === role);
    const out = ofRole.filter((m) => m.outByRollout).map((m) => m.name);
    expect(out.length, `${role} out of service by the rollout: ${out.join(", ")}`).toBeLessThanOrEqual(
      maxUnavailable(policy, role, ofRole.length),
    );
  }
}

describe("rollout properties", { timeout: 120_000 }, () => {
  it("(a)(b) over random fleets, starting states, edits and second edits: within max_unavailable, one group served, converges", () => {
    fc.assert(
      fc.property(
        scenarioArb({ policy: policyArb.map((p) => ({ ...p, incompatible: "pd_units" as const })) }),
        (sc) => {
          const run = simulate(sc, (p, engines) => {
            checkServing(p, engines);
            checkBudget(sc.policy, engines);
          });
          const { plan: last, engines, desired } = run.final;
          for (const m of engines)
            expect(
              m.phase === "captured" && m.applied.input_hash === desired.find((d) => d.engine === m.name)!.input_hash,
              `${m.name} converged`,
            ).toBe(true);
          expect(last.changes).toBe(false);
          expect(last.rollout).toEqual([]);
        },
      ),
      { numRuns: 80 },
    );
  });

  it('(b) holds under "recreate" too, and the fleet converges', () => {
    fc.assert(
      fc.property(
        scenarioArb({ policy: policyArb.map((p) => ({ ...p, incompatible: "recreate" as const })) }),
        (sc) => {
          const run = simulate(sc, (p, engines) => checkServing(p, engines));
          expect(run.final.plan.changes).toBe(false);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("(c) a fleet-wide incompatible change (plus random compatible edits) on >= 2P+2D keeps a compatible pair serving at every step", () => {
    const edits = fc.constantFrom<Edit>("incompatible", "both");
    fc.assert(
      fc.property(
        scenarioArb({
          minP: 2,
          minD: 2,
          edits,
          starts: fc.constant<ModelPhase>("captured"),
          second: false,
          policy: policyArb.map((p) => ({ ...p, incompatible: "pd_units" as const })),
        }),
        (sc) => {
          simulate(sc, (p) => {
            const roles = p.serving.engines.map((e) => e.role);
            expect(
              roles.includes("prefill") && roles.includes("decode"),
              `a pair serves: ${p.serving.engines.map((e) => e.engine).join(", ")}`,
            ).toBe(true);
          });
        },
      ),
      { numRuns: 60 },
    );
  });

  it("(c) compatible changes on >= 2P+2D keep a pair serving at every step", () => {
    fc.assert(
      fc.property(
        scenarioArb({
          minP: 2,
          minD: 2,
          edits: fc.constantFrom<Edit>("compatible", "none"),
          starts: fc.constant<ModelPhase>("captured"),
          second: false,
        }),
        (sc) => {
          simulate(sc, (p) => {
            const roles = p.serving.engines.map((e) => e.role);
            expect(roles.includes("prefill") && roles.includes("decode")).toBe(true);
          });
        },
      ),
      { numRuns: 40 },
    );
  });

  it("(d) once a replacement fails, nothing further is released, the plan says halted, and the engines not yet replaced keep serving", () => {
    fc.assert(
      fc.property(
        scenarioArb({
          failures: true,
          second: false,
          starts: fc.constant<ModelPhase>("captured"),
          policy: policyArb.map((p) => ({ ...p, incompatible: "pd_units" as const })),
        }),
        (sc) => {
          let failedSeen = false;
          simulate(sc, (p, engines) => {
            checkServing(p, engines);
            checkBudget(sc.policy, engines);
            // The plan was computed from the observation before its own execution: a failure it saw halts it.
            if (failedSeen && p.rollout.length > 0) {
              expect(p.actions.filter((a) => a.kind === "replace")).toEqual([]);
              expect(p.halted.length).toBeGreaterThan(0);
              expect(p.rollout.every((s) => s.status === "halted")).toBe(true);
              for (const m of engines.filter(
                (x) => x.applied.input_hash === x.running?.input_hash && !x.outByRollout && x.phase === "captured",
              ))
                expect(serves(m)).toBe(true);
            }
            failedSeen ||= engines.some((m) => m.phase === "failed");
          });
        },
      ),
      { numRuns: 60 },
    );
  });
});
