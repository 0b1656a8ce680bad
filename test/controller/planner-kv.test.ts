// The planner's KV-proof rules as tables (issue 11, items 2–5): from a
// converged P/D fleet whose proofs are changed in exactly the way each case
// reads — none, stale by a restart, failed, found by the scrape — what is
// proven, restarted, held and served, and why.
import { describe, expect, it } from "vitest";
import { plan } from "../../src/controller/planner.js";
import { pairKey, type KvPolicy, type Observed, type ObservedEngine } from "../../src/controller/plan-types.js";
import { DEFAULT_KV } from "../../src/desired/kv-policy.js";
import { failuresInARow } from "../../src/controller/kv-pairs.js";
import { kvPairWarnings } from "../../src/controller/pairing-warnings.js";
import { DEFAULT_ROLLOUT } from "../../src/desired/rollout-policy.js";
import {
  captured,
  compatibleEdit,
  desiredFor,
  desiredOf,
  fleetSpecs,
  handleOf,
  observedOf,
  proofOf,
  RUNNING,
  kvKinds as kinds,
  kvWith as kv,
  servedNames as served,
} from "./plan-fixtures.js";

describe("plan: proving a prefill → decode pair", () => {
  const [d1, d2] = fleetSpecs(1, 1).map(desiredOf) as [ReturnType<typeof desiredOf>, ReturnType<typeof desiredOf>];
  const [p, d] = [captured(d1), captured(d2)];
  const run = (proofs: Observed["proofs"], policy: KvPolicy = DEFAULT_KV, os = [p, d]) =>
    plan(desiredFor([d1, d2], DEFAULT_ROLLOUT, policy), observedOf(os, { proofs }), RUNNING);

  it("proves a pair never proven, and serves neither engine until it is", () => {
    const out = run({});
    expect(out.actions).toEqual([
      { kind: "prove", engine: "engine-2", prefill: "engine-1", reason: "first transfer proof of engine-1 → engine-2" },
    ]);
    expect(out.changes).toBe(true);
    expect(out.serving).toEqual({ group_signature: null, pairing_class: null, engines: [], pairs: [] });
  });

  it("neither proves nor restarts a pair while one engine cannot be observed (nothing on a guess)", () => {
    const unknown = { ...d, liveness: "unknown" as const };
    expect(run({}, DEFAULT_KV, [p, unknown]).actions.filter((a) => a.kind !== "wait")).toEqual([]);
    const failed = {
      [pairKey("engine-1", "engine-2")]: {
        ...proofOf(p, d),
        passed: false,
        cause: "transfer-failed" as const,
        failures: 1,
      },
    };
    expect(run(failed, DEFAULT_KV, [p, unknown]).actions.filter((a) => a.kind !== "wait")).toEqual([]);
    expect(run(failed, DEFAULT_KV, [p, d]).actions.map((a) => a.kind)).toContain("restart-unproven");
  });

  it("does nothing for a pair proven as both engines run now, and serves it", () => {
    const out = run({ [pairKey("engine-1", "engine-2")]: proofOf(p, d) });
    expect(out.actions).toEqual([]);
    expect(out.changes).toBe(false);
    expect(served(out)).toEqual(["engine-1", "engine-2"]);
    expect(out.serving.pairs).toEqual([{ prefill: "engine-1", decode: "engine-2" }]);
  });

  it.each([
    [
      "the prefill",
      { prefill: { ...proofOf(p, d).prefill, launch_token: "tok-old" } },
      /^the prefill engine-1 restarted/,
    ],
    ["the decode", { decode: { ...proofOf(p, d).decode, launch_token: "tok-old" } }, /^the decode restarted/],
  ])("proves the pair again when %s restarted since its proof (a new launch token)", (_what, over, reason) => {
    const out = run({ [pairKey("engine-1", "engine-2")]: proofOf(p, d, over) });
    expect(kinds(out.actions)).toEqual(["prove engine-2 < engine-1"]);
    expect((out.actions[0] as { reason: string }).reason).toMatch(reason);
    expect(served(out)).toEqual([]);
  });

  it("restarts a proven decode whose prefill restarted under on_prefill_restart=restart_decodes", () => {
    const stale = proofOf(p, d, { prefill: { ...proofOf(p, d).prefill, launch_token: "tok-old" } });
    const out = run({ [pairKey("engine-1", "engine-2")]: stale }, kv({ on_prefill_restart: "restart_decodes" }));
    expect(kinds(out.actions)).toEqual(["restart-unproven engine-2 < engine-1"]);
    expect((out.actions[0] as { reason: string }).reason).toMatch(
      /its prefill engine-1 restarted .*on_prefill_restart=restart_decodes restarts the decode/,
    );
  });

  it("proves again a pair whose decode the periodic scrape found decode-only", () => {
    const found = proofOf(p, d, {
      passed: false,
      source: "watch",
      cause: "silent-recompute",
      message: "external_kv_transfer flat while local_compute grew by 480",
    });
    const out = run({ [pairKey("engine-1", "engine-2")]: found });
    expect(kinds(out.actions)).toEqual(["prove engine-2 < engine-1"]);
    expect((out.actions[0] as { reason: string }).reason).toMatch(/periodic scrape .* found silent-recompute/);
    expect(served(out)).toEqual([]);
  });

  const failed = (failures: number) =>
    proofOf(p, d, {
      passed: false,
      cause: "transfer-failed",
      message: "nixl_num_failed_transfers grew by 1",
      failures,
    });

  it("restarts the decode after a failed proof, naming the cause and the message", () => {
    const out = run({ [pairKey("engine-1", "engine-2")]: failed(1) });
    expect(out.actions).toEqual([
      {
        kind: "restart-unproven",
        engine: "engine-2",
        prefill: "engine-1",
        reason: expect.stringMatching(
          /failed \(transfer-failed: nixl_num_failed_transfers grew by 1\); restart 1 of at most 1/,
        ),
      },
    ]);
    expect(served(out)).toEqual([]);
  });

  it.each([
    [
      "after max_decode_restarts failed proofs in a row",
      failed(2),
      DEFAULT_KV,
      /2 failed proofs in a row, past max_decode_restarts=1/,
    ],
    ["under on_failure=hold", failed(1), kv({ on_failure: "hold" }), /policy on_failure=hold/],
  ])("holds the pair out of serving %s: a wait (halted) and a warning", (_what, proof, policy, why) => {
    const out = run({ [pairKey("engine-1", "engine-2")]: proof }, policy);
    expect(out.actions).toEqual([
      { kind: "wait", engine: "engine-2", until: "halted", why: expect.stringMatching(why) },
    ]);
    expect(out.changes).toBe(false);
    expect(out.warnings).toEqual([
      expect.stringMatching(/^pair engine-1 → engine-2 is held out of serving: .*transfer-failed/),
    ]);
    expect(served(out)).toEqual([]);
  });

  it("counts failed proofs in a row against one prefill instance: a new prefill starts the count again", () => {
    const before = failed(1);
    expect(failuresInARow(before, before.prefill.launch_token)).toBe(2);
    // Found by the rollout property: a pair failed against the old prefill, then a replaced prefill's first
    // proof failed too; counted on, the pair was held without the decode's one restart, and the rollout stalled.
    expect(failuresInARow(before, "tok-new-prefill")).toBe(1);
    expect(failuresInARow(proofOf(p, d), before.prefill.launch_token)).toBe(1);
    expect(failuresInARow(undefined, "tok-new-prefill")).toBe(1);
  });

  it("proves nothing with kv_transfer.prove=false: pairs serve by group as before", () => {
    const out = run({}, kv({ prove: false }));
    expect(out.actions).toEqual([]);
    expect(served(out)).toEqual(["engine-1", "engine-2"]);
    expect(out.serving.pairs).toEqual([{ prefill: "engine-1", decode: "engine-2" }]);
  });

  it("tells the pairs of two NIXL classes in one line per set of prefills and decodes, not one per pair", () => {
    const ds = fleetSpecs(3, 3).map(desiredOf);
    const hashes = ["a", "a", "b", "a", "b", "b"].map((c) => c.repeat(64));
    const os = ds.map((x, i) => captured(x, { nixl_hash: hashes[i]! }));
    const why = (a: string, b: string) =>
      `serve one model but their recorded NIXL compatibility hashes differ (${a.repeat(12)}… vs ${b.repeat(12)}…)`;
    const warnings = kvPairWarnings(ds, observedOf(os));
    expect(warnings.map((w) => w.slice(0, w.indexOf(")", w.indexOf("differ (")) + 1))).toEqual([
      `engine-1, engine-2 (prefill) and engine-5, engine-6 (decode) ${why("a", "b")}`,
      `engine-3 (prefill) and engine-4 (decode) ${why("b", "a")}`,
    ]);
    // A line's every prefill × decode pair is an incompatible one, and every incompatible pair is on a line.
    const told = warnings.flatMap((w) => {
      const [, ps, dsOf] = /^(.+) \(prefill\) and (.+) \(decode\) serve/.exec(w)!;
      return ps!.split(", ").flatMap((p) => dsOf!.split(", ").map((d) => `${p}>${d}`));
    });
    const differ = ds.flatMap((p, i) =>
      ds.flatMap((d, j) =>
        p.role === "prefill" && d.role === "decode" && hashes[i] !== hashes[j] ? [`${p.engine}>${d.engine}`] : [],
      ),
    );
    expect(told.sort()).toEqual(differ.sort());
  });

  it("never pairs engines whose recorded NIXL hashes differ: no proof, nothing served, a warning naming both", () => {
    const os: ObservedEngine[] = [
      { ...p, nixl_hash: "a".repeat(64) },
      { ...d, nixl_hash: "b".repeat(64) },
    ];
    for (const policy of [DEFAULT_KV, kv({ prove: false })]) {
      const out = run({}, policy, os);
      expect(out.actions).toEqual([]);
      expect(served(out)).toEqual([]);
      expect(out.warnings).toEqual([
        expect.stringMatching(
          /^engine-1 \(prefill\) and engine-2 \(decode\) serve one model but their recorded NIXL compatibility hashes differ \(aaaaaaaaaaaa… vs bbbbbbbbbbbb…\)/,
        ),
        "no compatible prefill/decode pair in service: prefill engine-1 and decode engine-2 differ in NIXL compatibility hash, model tree (or, unrecorded, group signature), TP ratio or block size; a router can pair none of them",
      ]);
    }
    // One hash not recorded: nothing says they differ.
    expect(kinds(run({}, DEFAULT_KV, [os[0]!, d]).actions)).toEqual(["prove engine-2 < engine-1"]);
  });

  it("proves no pair of a decode this plan restarts, nor with a prefill it restarts", () => {
    const gone = (o: ObservedEngine) => ({ ...o, liveness: "gone" as const });
    expect(kinds(run({}, DEFAULT_KV, [p, gone(d)]).actions)).toEqual(["restart-lost engine-2"]);
    expect(kinds(run({}, DEFAULT_KV, [gone(p), d]).actions)).toEqual(["restart-lost engine-1"]);
  });
});

describe("plan: proofs across a fleet", () => {
  it("proves one pair per decode per plan, its first prefill in name order; decodes in parallel", () => {
    const ds = fleetSpecs(2, 2).map(desiredOf);
    const out = plan(
      desiredFor(ds),
      observedOf(
        ds.map((x) => captured(x)),
        { proofs: {} },
      ),
      RUNNING,
    );
    expect(kinds(out.actions)).toEqual(["prove engine-3 < engine-1", "prove engine-4 < engine-1"]);
  });

  it("serves the largest set whose every prefill × decode pair is proven (the router pairs any of them)", () => {
    const ds = fleetSpecs(2, 2).map(desiredOf);
    const os = ds.map((x) => captured(x));
    const proofs = Object.fromEntries(
      [
        [0, 2],
        [0, 3],
        [1, 2],
      ].map(([a, b]) => [pairKey(os[a!]!.engine, os[b!]!.engine), proofOf(os[a!]!, os[b!]!)]),
    );
    const out = plan(desiredFor(ds), observedOf(os, { proofs }), RUNNING);
    expect(served(out)).toEqual(["engine-1", "engine-3", "engine-4"]);
    expect(out.serving.pairs).toEqual([
      { prefill: "engine-1", decode: "engine-3" },
      { prefill: "engine-1", decode: "engine-4" },
    ]);
    expect(kinds(out.actions)).toEqual(["prove engine-4 < engine-2"]);
  });

  it("holds the next rollout step while a replacement is captured but not yet proven, and releases it once proven", () => {
    const specs = fleetSpecs(2, 1);
    const next = specs.map((s, i) => (i < 2 ? desiredOf(compatibleEdit(s)) : desiredOf(s)));
    // engine-1 is back at its new inputs as a new instance; engine-2 waits for it.
    const os = [
      captured(next[0]!, { handle: handleOf("engine-1", "tok-new") }),
      captured(desiredOf(specs[1]!)),
      captured(next[2]!),
    ];
    const stale = { [pairKey("engine-2", "engine-3")]: proofOf(os[1]!, os[2]!) };
    const held = plan(desiredFor(next), observedOf(os, { proofs: stale }), RUNNING);
    expect(kinds(held.actions)).toEqual(["prove engine-3 < engine-1", "wait engine-2"]);
    expect(held.actions[1]).toMatchObject({
      why: expect.stringMatching(/engine-1, captured, its KV transfer with engine-3 not yet proven/),
    });
    const proven = { ...stale, [pairKey("engine-1", "engine-3")]: proofOf(os[0]!, os[2]!) };
    expect(kinds(plan(desiredFor(next), observedOf(os, { proofs: proven }), RUNNING).actions)).toEqual([
      "replace engine-2",
    ]);
  });

  it("does not stall a rollout on an engine with no compatible peer at all", () => {
    const specs = fleetSpecs(2, 0);
    const next = specs.map((s) => desiredOf(compatibleEdit(s)));
    const os = [captured(next[0]!), captured(desiredOf(specs[1]!))];
    expect(kinds(plan(desiredFor(next), observedOf(os, { proofs: {} }), RUNNING).actions)).toEqual([
      "replace engine-2",
    ]);
  });
});
