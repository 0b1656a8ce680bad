// Pairing across TP sizes (issue 12 item 3): a prefill and a decode pair by what
// vLLM pairs them by — one NIXL compatibility hash, one model tree, a TP ratio
// and block size its handshake accepts — not by seed 000's group signature,
// which holds TP. Fixtures: a converged 1P/1D fleet whose observed engines are
// given the recorded hash, tree, TP and block size each case reads.
import { describe, expect, it } from "vitest";
import { plan } from "../../src/controller/planner.js";
import { pairKey, type Observed, type ObservedEngine } from "../../src/controller/plan-types.js";
import { DEFAULT_KV } from "../../src/desired/kv-policy.js";
import { DEFAULT_ROLLOUT } from "../../src/desired/rollout-policy.js";
import {
  argsEdit,
  captured,
  desiredFor,
  desiredOf,
  fleetSpecs,
  handleOf,
  observedOf,
  proofOf,
  RUNNING,
  servedNames as served,
} from "./plan-fixtures.js";

const [HASH, TREE] = ["a".repeat(64), "7".repeat(64)];
const specs = fleetSpecs(1, 1);
const [d1, d2] = specs.map(desiredOf) as [ReturnType<typeof desiredOf>, ReturnType<typeof desiredOf>];
/** An engine as recorded after a checked run: hash, tree, TP and block size, in its own TP's group. */
const recorded = (o: ObservedEngine, tp: number, over: Partial<ObservedEngine> = {}): ObservedEngine => ({
  ...o,
  nixl_hash: HASH,
  model_tree_sha256: TREE,
  tensor_parallel_size: tp,
  block_size: 16,
  group_signature: `group-tp${tp}`,
  ...over,
});
const kinds = (p: ReturnType<typeof plan>) => p.actions.map((a) => `${a.kind} ${a.engine}`);
const run = (os: ObservedEngine[], proofs?: Observed["proofs"], kv = DEFAULT_KV) =>
  plan(desiredFor([d1, d2], DEFAULT_ROLLOUT, kv), observedOf(os, proofs === undefined ? {} : { proofs }), RUNNING);

describe("plan: pairing across TP sizes", () => {
  const [p2, d4] = [recorded(captured(d1), 2), recorded(captured(d2), 4)];

  it("proves a TP-2 prefill with a TP-4 decode of another group, then serves both, each with its own group", () => {
    const first = run([p2, d4], {});
    expect(kinds(first)).toEqual(["prove engine-2"]);
    expect(first.warnings).toEqual([]);
    const proven = run([p2, d4]);
    expect(proven.actions).toEqual([]);
    expect(served(proven)).toEqual(["engine-1", "engine-2"]);
    expect(proven.serving).toMatchObject({
      // Two groups listed: no one group to name; the class says what they pair by.
      group_signature: null,
      pairing_class: `nixl ${HASH} tree ${TREE}`,
      pairs: [{ prefill: "engine-1", decode: "engine-2" }],
    });
    expect(proven.serving.engines.map((e) => e.group_signature)).toEqual(["group-tp2", "group-tp4"]);
    // Without proofs the pair serves as compatible.
    expect(served(run([p2, d4], {}, { ...DEFAULT_KV, prove: false }))).toEqual(["engine-1", "engine-2"]);
  });

  it.each<[string, Partial<ObservedEngine>, Partial<ObservedEngine>, RegExp | null]>([
    [
      "a prefill of larger TP than its decode",
      { tensor_parallel_size: 4 },
      { tensor_parallel_size: 2 },
      /engine-1 \(prefill, TP 4\) and engine-2 \(decode, TP 2\) agree on their NIXL compatibility hash, but vLLM's NIXL handshake refuses a decode of smaller TP/,
    ],
    [
      "a decode TP not a multiple of the prefill's",
      { tensor_parallel_size: 2 },
      { tensor_parallel_size: 3 },
      /needs the decode's TP to be a multiple of the prefill's \(decode TP 3, prefill TP 2/,
    ],
    [
      "another block size",
      {},
      { block_size: 32 },
      /refuses a remote prefill of another block size \(prefill 16, decode 32\)/,
    ],
    ["another model tree under one hash", {}, { model_tree_sha256: "8".repeat(64) }, null],
    // Not recorded (a run checked before the hash was): the old rule, one group, and these are two.
    ["a hash not recorded, in two groups", {}, { nixl_hash: null }, null],
  ])("never pairs %s: no proof, nothing served", (_what, pOver, dOver, warning) => {
    for (const kv of [DEFAULT_KV, { ...DEFAULT_KV, prove: false }]) {
      const out = run(
        [
          { ...p2, ...pOver },
          { ...d4, ...dOver },
        ],
        {},
        kv,
      );
      expect(out.actions).toEqual([]);
      expect(served(out)).toEqual([]);
      expect(out.warnings.at(-1)).toMatch(/^no compatible prefill\/decode pair in service/);
      if (warning) expect(out.warnings[0]).toMatch(warning);
    }
  });

  it("keeps a pair whose decode's runtime was edited alone: its group changes, its NIXL hash does not", () => {
    // The edit (extra_args: a group field) is planned without a warning that the pair splits...
    const next = desiredOf(argsEdit(specs[1]!));
    const before = plan(desiredFor([d1, next]), observedOf([p2, d4]), RUNNING);
    expect(kinds(before)).toEqual(["replace engine-2"]);
    // (A 1P/1D fleet has no pair while its decode is replaced: the rollout says so; pairing says nothing.)
    expect(before.warnings).toEqual([expect.stringMatching(/^rollout: replacing engine-2 leaves no compatible/)]);
    // ...and once the replacement is captured in a new group, the pair is proven again and serves.
    const replaced = recorded(captured(next, { handle: handleOf("engine-2", "tok-new") }), 4, {
      group_signature: "group-tp4-edited",
    });
    const stale = { [pairKey("engine-1", "engine-2")]: proofOf(p2, d4) };
    const after = plan(desiredFor([d1, next]), observedOf([p2, replaced], { proofs: stale }), RUNNING);
    expect(kinds(after)).toEqual(["prove engine-2"]);
    expect(after.warnings).toEqual([]);
    const proven = { [pairKey("engine-1", "engine-2")]: proofOf(p2, replaced) };
    const served_ = plan(desiredFor([d1, next]), observedOf([p2, replaced], { proofs: proven }), RUNNING);
    expect(served(served_)).toEqual(["engine-1", "engine-2"]);
  });

  it("still splits a pair whose edit changes a hashed input (the model dtype): a warning before it starts", () => {
    const next = desiredOf({
      ...specs[1]!,
      launch: { ...specs[1]!.launch, runtime: { ...specs[1]!.launch.runtime, model_dtype: "float16" } },
    });
    const out = plan(desiredFor([d1, next]), observedOf([p2, d4]), RUNNING);
    expect(out.warnings[0]).toMatch(
      /^after this change no captured prefill and decode share their pairing inputs .* differ in launch\.runtime\.model_dtype/,
    );
  });
});
