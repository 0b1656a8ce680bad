// Rollouts with KV proofs that do not all pass: under on_failure=hold (or no
// restarts left) a faulty decode's pairs stay failed, so the fleet never
// settles; at every step the serving fleet still lists only proven pairs, no
// decode is restarted by policy hold, and failed pairs are said in warnings.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { KvPolicy } from "../../src/controller/plan-types.js";
import { checkProven, scenarioArb, simulate } from "./rollout-sim.js";

const holdArb: fc.Arbitrary<KvPolicy> = fc.record({
  prove: fc.constant(true),
  on_failure: fc.constantFrom<KvPolicy["on_failure"]>("hold", "restart_decode"),
  on_prefill_restart: fc.constantFrom<KvPolicy["on_prefill_restart"]>("reprove", "restart_decodes"),
  max_decode_restarts: fc.constant(0),
  watch_interval_s: fc.constant(30),
});

describe("rollout properties with proofs that fail", { timeout: 120_000 }, () => {
  it("(e) never lists a failed or unproven pair, never restarts a decode for a failed proof, and warns of every held pair", () => {
    fc.assert(
      fc.property(scenarioArb({ kv: holdArb }), (sc) => {
        simulate(
          sc,
          (p, _engines, _desired, observed) => {
            checkProven(p, sc.kv, observed);
            for (const a of p.actions.filter((x) => x.kind === "restart-unproven"))
              expect(a.reason, `${a.engine} restarted under ${sc.kv.on_failure}`).toMatch(/on_prefill_restart/);
            const held = p.actions.filter(
              (a) => a.kind === "wait" && a.until === "halted" && /held out of serving/.test(a.why),
            );
            for (const w of held) expect(p.warnings).toContainEqual(w.kind === "wait" ? w.why : "");
          },
          { settle: false, steps: 150 },
        );
      }),
      { numRuns: 60 },
    );
  });
});
