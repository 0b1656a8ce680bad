// Property tests of the rollout guarantees over random fleets, random starting
// states and random edits: a model of the fleet (rollout-model.ts) executes
// each plan, one engine moves one phase, the planner plans again, until
// nothing moves. Checked at every step: (a) no role has more engines out of
// service because of the rollout than max_unavailable allows; (b) the serving
// fleet lists only captured engines and one group among prefill/decode;
// (c) a fleet-wide incompatible change on >= 2P+2D keeps a compatible pair
// serving throughout; (d) a failed replacement releases nothing further;
// (e) with KV proofs (recorded current, stale, failed or found by the scrape;
// faulty decodes; prefill restarts) the serving fleet never lists an unproven
// pair (rollout-sim.ts checkProven).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { maxUnavailable } from "../../src/controller/rollout.js";
import { isPairedRole } from "../../src/controller/serving-fleet.js";
import type { Plan, RolloutPolicy } from "../../src/controller/plan-types.js";
import { signatureOf } from "./plan-fixtures.js";
import { serves, type ModelEngine, type ModelPhase } from "./rollout-model.js";
import { DEFAULT_KV } from "../../src/desired/kv-policy.js";
import {
  checkProven,
  policyArb,
  scenarioArb,
  simulate,
  type Edit,
  type InitialProof,
  type Scenario,
} from "./rollout-sim.js";

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

/** A converged starting fleet: every pair proven as it runs (a pair must keep serving from the first step). */
const PROVEN = fc.constant<InitialProof>("passed");

/**
 * Found by these properties (seeds -570039975 and -54531634 at 25 times the runs): a pair that failed its proof
 * against a prefill instance since replaced, whose faulty decode then failed the new prefill's first proof,
 * was held as if its restarts were used up (none was made), and the rollout waited on it for good. Failed
 * proofs now count in a row against one prefill instance (kv-pairs.ts failuresInARow).
 */
const FOUND: Record<"pdUnits" | "recreate", Scenario> = {
  pdUnits: {
    roles: ["prefill", "prefill", "decode", "decode", "decode", "embed"],
    starts: ["pending", "probed", "captured", "captured", "captured", "captured"],
    first: ["both", "compatible", "none", "none", "none", "none"],
    second: { at: 7, edits: ["none", "revert", "both", "none", "revert", "none"] },
    failing: [false, false, false, false, false, false],
    policy: { max_unavailable: { decode: "25%" }, default_max_unavailable: 1, incompatible: "pd_units" },
    kv: DEFAULT_KV,
    proofs: ["passed", "passed", "failed", "passed"],
    faulty: [false, false, false, false, true, false],
    bumps: [],
    picks: [498961279],
  },
  recreate: {
    roles: ["prefill", "prefill", "prefill", "decode", "embed"],
    starts: ["captured", "captured", "captured", "probed", "captured"],
    first: ["none", "none", "incompatible", "none", "none"],
    second: { at: 3, edits: ["revert", "compatible", "none", "none", "none"] },
    failing: [false, false, false, false, false],
    policy: { max_unavailable: {}, default_max_unavailable: "25%", incompatible: "recreate" },
    kv: DEFAULT_KV,
    proofs: ["passed", "passed", "failed", "passed"],
    faulty: [false, false, false, true, false],
    bumps: [],
    picks: [0, 0, 0, 1535801587, 0],
  },
};

describe("rollout properties", { timeout: 120_000 }, () => {
  it("(a)(b) over random fleets, starting states, edits and second edits: within max_unavailable, one group served, converges", () => {
    fc.assert(
      fc.property(
        scenarioArb({ policy: policyArb.map((p) => ({ ...p, incompatible: "pd_units" as const })) }),
        (sc) => {
          const run = simulate(sc, (p, engines, _desired, observed) => {
            checkServing(p, engines);
            checkBudget(sc.policy, engines);
            checkProven(p, sc.kv, observed);
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
      { numRuns: 80, examples: [[FOUND.pdUnits]] },
    );
  });

  it('(b) holds under "recreate" too, and the fleet converges', () => {
    fc.assert(
      fc.property(
        scenarioArb({ policy: policyArb.map((p) => ({ ...p, incompatible: "recreate" as const })) }),
        (sc) => {
          const run = simulate(sc, (p, engines, _desired, observed) => {
            checkServing(p, engines);
            checkProven(p, sc.kv, observed);
          });
          expect(run.final.plan.changes).toBe(false);
        },
      ),
      { numRuns: 40, examples: [[FOUND.recreate]] },
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
          initial: PROVEN,
          kvFaults: false,
        }),
        (sc) => {
          simulate(sc, (p, _engines, _desired, observed) => {
            checkProven(p, sc.kv, observed);
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
          initial: PROVEN,
          kvFaults: false,
        }),
        (sc) => {
          simulate(sc, (p, _engines, _desired, observed) => {
            checkProven(p, sc.kv, observed);
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
          simulate(sc, (p, engines, _desired, observed) => {
            checkServing(p, engines);
            checkBudget(sc.policy, engines);
            checkProven(p, sc.kv, observed);
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
