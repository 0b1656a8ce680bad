// The planner's decode restarts for KV proofs beside a rollout: a decode repaired
// for its own failed proof while its inputs changed, and decodes restarted after
// their prefill under on_prefill_restart=restart_decodes, within the decode
// role's budget.
import { describe, expect, it } from "vitest";
import { plan } from "../../src/controller/planner.js";
import { pairKey, type Observed, type ObservedEngine } from "../../src/controller/plan-types.js";
import { DEFAULT_ROLLOUT } from "../../src/desired/rollout-policy.js";
import {
  captured,
  compatibleEdit,
  desiredFor,
  desiredOf,
  fleetSpecs,
  observedOf,
  proofOf,
  provenPairs,
  RUNNING,
  kvKinds as kinds,
  kvWith as kv,
  servedNames as served,
} from "./plan-fixtures.js";

describe("plan: a decode repaired for its failed proof while its inputs changed", () => {
  // engine-1 prefill; engine-2 decode edited in desired/; engine-3 decode still starting (out of service).
  const specs = fleetSpecs(1, 2);
  const ds = specs.map(desiredOf);
  const next = [ds[0]!, desiredOf(compatibleEdit(specs[1]!)), ds[2]!];
  const os = [captured(ds[0]!), captured(ds[1]!), captured(ds[2]!, { phase: "started" })];
  const run = (proofs: Observed["proofs"]) => plan(desiredFor(next), observedOf(os, { proofs }), RUNNING);

  it("its change waits for the decode budget while it serves", () => {
    const out = run(provenPairs(os));
    expect(kinds(out.actions)).toEqual(["wait engine-2"]);
    expect(out.actions[0]).toMatchObject({ until: "rollout", why: expect.stringMatching(/engine-3, started/) });
  });

  it("its change rides along with the restart its failed proof takes it out for (found by the planner property)", () => {
    const failed = proofOf(os[0]!, os[1]!, { passed: false, cause: "transfer-failed", failures: 1 });
    const out = run({ [pairKey("engine-1", "engine-2")]: failed });
    expect(kinds(out.actions)).toEqual(["restart-unproven engine-2 < engine-1", "replace engine-2"]);
  });
});

describe("plan: decodes restarted after their prefill (on_prefill_restart=restart_decodes)", () => {
  const restartDecodes = kv({ on_prefill_restart: "restart_decodes" });
  /** Every pair proven, the prefills' proofs of an older instance for those in `restarted`. */
  const provenBefore = (os: ObservedEngine[], restarted: string[]) =>
    Object.fromEntries(
      os
        .filter((o) => o.role === "prefill")
        .flatMap((p) =>
          os
            .filter((o) => o.role === "decode")
            .map((d) => {
              const proof = proofOf(p, d);
              const old = restarted.includes(p.engine) ? { ...proof.prefill, launch_token: "tok-old" } : proof.prefill;
              return [pairKey(p.engine, d.engine), { ...proof, prefill: old }];
            }),
        ),
    );

  /** The plan of a converged fleet of `p` prefills and `d` decodes right after engine-1 (a prefill) restarted. */
  const afterPrefillRestart = (p: number, d: number, rollout = DEFAULT_ROLLOUT) => {
    const ds = fleetSpecs(p, d).map(desiredOf);
    const os = ds.map((x) => captured(x));
    return plan(
      desiredFor(ds, rollout, restartDecodes),
      observedOf(os, { proofs: provenBefore(os, ["engine-1"]) }),
      RUNNING,
    );
  };

  it("restarts those still serving other pairs one at a time within the decode max_unavailable; the others wait (rollout)", () => {
    const out = afterPrefillRestart(2, 2);
    expect(kinds(out.actions)).toEqual(["restart-unproven engine-3 < engine-1", "wait engine-4"]);
    expect(out.actions[1]).toMatchObject({
      until: "rollout",
      why: expect.stringMatching(
        /it waits: 1 decode engine\(s\) may be out of service or unproven at once, and engine-3 is$/,
      ),
    });
    expect(served(out)).toEqual(["engine-2", "engine-4"]);
  });

  it("restarts at once the decodes that serve nothing (proven with no prefill that runs now)", () => {
    const out = afterPrefillRestart(1, 2);
    expect(kinds(out.actions)).toEqual([
      "restart-unproven engine-2 < engine-1",
      "restart-unproven engine-3 < engine-1",
    ]);
  });

  it("never takes the last proven pair out while another decode is on its way back, whatever the budget", () => {
    const out = afterPrefillRestart(2, 2, { ...DEFAULT_ROLLOUT, max_unavailable: { decode: "100%" } });
    expect(kinds(out.actions)).toEqual(["restart-unproven engine-3 < engine-1", "wait engine-4"]);
    expect(out.actions[1]).toMatchObject({
      why: expect.stringMatching(/would leave no proven prefill\/decode pair serving/),
    });
    expect(served(out)).toEqual(["engine-2", "engine-4"]);
  });
});
