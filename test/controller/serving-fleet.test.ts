import fc from "fast-check";
// Choosing what the router may pair: captured engines only, and one group
// among prefill and decode engines.
import { describe, expect, it } from "vitest";
import { DEFAULT_KV } from "../../src/desired/kv-policy.js";
import { chooseClass, servingFleet, type Candidate } from "../../src/controller/serving-fleet.js";
import { pairableSet } from "../../src/controller/kv-pairs.js";
import { captured, desiredOf, fleetSpecs, incompatibleEdit, observedOf, released, specOf } from "./plan-fixtures.js";

const c = (engine: string, role: string, pairing_class: string | null, current = true): Candidate => ({
  engine,
  role,
  pairing_class,
  current,
});
const names = (f: ReturnType<typeof servingFleet>) => f.engines.map((e) => e.engine);

describe("chooseClass", () => {
  it("prefers the desired state's group when it has a captured prefill and decode", () => {
    expect(
      chooseClass(
        [
          c("engine-1", "prefill", "old", false),
          c("engine-2", "decode", "old", false),
          c("engine-3", "prefill", "new"),
          c("engine-4", "decode", "new"),
        ],
        "old",
      ),
    ).toBe("new");
  });

  it("keeps the group listed now while the desired group has no captured pair yet", () => {
    const cs = [
      c("engine-1", "prefill", "old", false),
      c("engine-2", "decode", "old", false),
      c("engine-3", "prefill", "new"),
    ];
    expect(chooseClass(cs, "old")).toBe("old");
  });

  it("falls back to the group with most engines, then signature order, when the listed one lost its pair", () => {
    const cs = [
      c("engine-1", "prefill", "bbb", false),
      c("engine-2", "decode", "bbb", false),
      c("engine-3", "prefill", "aaa", false),
      c("engine-4", "decode", "aaa", false),
      c("engine-5", "decode", "ccc", false),
    ];
    expect(chooseClass(cs, "ccc")).toBe("aaa");
    expect(chooseClass([...cs, c("engine-6", "decode", "bbb", false)], null)).toBe("bbb");
  });

  it("is null when no group holds a prefill and a decode", () => {
    expect(
      chooseClass([c("engine-1", "prefill", "a"), c("engine-2", "decode", "b"), c("engine-3", "decode", null)], null),
    ).toBeNull();
  });
});

describe("servingFleet", () => {
  const ds = fleetSpecs(2, 2).map(desiredOf);

  it("lists the seed-003 record of every captured engine, with its group", () => {
    const f = servingFleet(ds, observedOf(ds.map((d) => captured(d))), new Set(), DEFAULT_KV);
    expect(f.engines[0]).toEqual({
      iid: "n1",
      url: "http://10.0.0.11:8000",
      attestation_url: "http://10.0.0.11:8010",
      role: "prefill",
      engine: "engine-1",
      group_signature: f.group_signature,
    });
    expect(names(f)).toEqual(["engine-1", "engine-2", "engine-3", "engine-4"]);
  });

  it.each([
    ["not captured", { phase: "probed" }],
    ["gone", { liveness: "gone" as const }],
    ["with a problem", { problem: "key not enforced" }],
    ["without a handle", { handle: null }],
  ])("leaves out an engine %s", (_what, over) => {
    const f = servingFleet(
      ds,
      observedOf(ds.map((d) => (d.engine === "engine-2" ? captured(d, over) : captured(d)))),
      new Set(),
      DEFAULT_KV,
    );
    expect(names(f)).toEqual(["engine-1", "engine-3", "engine-4"]);
  });

  it("lists a held engine at the URL it runs on, not the one desired/ names for its replacement", () => {
    const moved = ds.map((d) =>
      d.engine === "engine-2"
        ? desiredOf({ ...specOf(2, "prefill"), url: "http://10.0.0.12:9999", input_hash: "moved" })
        : d,
    );
    const f = servingFleet(moved, observedOf(ds.map((d) => captured(d))), new Set(), DEFAULT_KV);
    expect(f.engines.find((e) => e.engine === "engine-2")?.url).toBe(ds[1]!.url);
    expect(ds[1]!.url).not.toBe("http://10.0.0.12:9999");
  });

  it("leaves out engines the plan disrupts, and engines not desired", () => {
    const extra = desiredOf(specOf(9, "decode"));
    const f = servingFleet(ds, observedOf([...ds, extra].map((d) => captured(d))), new Set(["engine-3"]), DEFAULT_KV);
    expect(names(f)).toEqual(["engine-1", "engine-2", "engine-4"]);
  });

  it("never lists prefill and decode engines of two groups: mid-rollout only the old pair serves, then only the new", () => {
    const specs = fleetSpecs(2, 2);
    const next = specs.map((s) => desiredOf(incompatibleEdit(s)));
    const old = specs.map(desiredOf);
    // engine-1 captured at the new revision, engine-3 still on its way: the new group has no pair.
    const mid = observedOf(
      [captured(next[0]!), captured(old[1]!), released(old[2]!, next[2]!, "probed"), captured(old[3]!)],
      { serving: { group_signature: captured(old[1]!).group_signature, engines: [], pairs: [] } },
    );
    const f1 = servingFleet(next, mid, new Set(), DEFAULT_KV);
    expect(names(f1)).toEqual(["engine-2", "engine-4"]);
    // engine-3 captured too: the desired group has its pair, and the old engines are no longer listed.
    const after = observedOf([captured(next[0]!), captured(old[1]!), captured(next[2]!), captured(old[3]!)], {
      serving: mid.serving,
    });
    const f2 = servingFleet(next, after, new Set(), DEFAULT_KV);
    expect(names(f2)).toEqual(["engine-1", "engine-3"]);
    expect(f2.group_signature).toBe(captured(next[0]!).group_signature);
  });

  it("lists captured engines of other roles whatever their group", () => {
    const other = desiredOf(specOf(5, "embed"));
    const f = servingFleet([other], observedOf([captured(other, { group_signature: null })]), new Set(), DEFAULT_KV);
    expect(f).toEqual({
      group_signature: null,
      pairing_class: null,
      engines: [expect.objectContaining({ engine: "engine-5", role: "embed", group_signature: "" })],
      pairs: [],
    });
  });
});

describe("pairableSet: the prefill/decode set a router may pair any way", () => {
  const okAll = (bad: Array<[string, string]>) => (p: string, d: string) => !bad.some(([a, b]) => a === p && b === d);

  it("keeps everyone when every pair is ok, and no one when none is", () => {
    expect(pairableSet(["p1", "p2"], ["d1", "d2"], okAll([]))).toEqual(["p1", "p2", "d1", "d2"]);
    expect(pairableSet(["p1"], ["d1"], () => false)).toEqual([]);
    expect(pairableSet(["p1"], [], () => true)).toEqual([]);
  });

  it("drops only the engine at fault", () => {
    const noP2 = okAll([
      ["p2", "d1"],
      ["p2", "d2"],
    ]);
    expect(pairableSet(["p1", "p2", "p3"], ["d1", "d2"], noP2)).toEqual(["p1", "p3", "d1", "d2"]);
    const noD2 = okAll([
      ["p1", "d2"],
      ["p2", "d2"],
    ]);
    expect(pairableSet(["p1", "p2"], ["d1", "d2", "d3"], noD2)).toEqual(["p1", "p2", "d1", "d3"]);
  });

  it("keeps a pair when a lone decode is proven with one prefill only (dropping the decode would leave none)", () => {
    const only = (p: string, d: string) => p === "p1" && d === "d1";
    expect(pairableSet(["p1", "p2", "p3"], ["d1"], only)).toEqual(["p1", "d1"]);
  });

  it("breaks a tie between equally large sets by the earlier seed: prefills first, in name order", () => {
    // p2–d2 not ok: seeded by p1 {p1, d1, d2}, by p2 {p1, p2, d1}; both three engines, p1 seeds first.
    const ok = okAll([["p2", "d2"]]);
    expect(pairableSet(["p1", "p2"], ["d1", "d2"], ok)).toEqual(["p1", "d1", "d2"]);
  });

  /** The rule as first written (every seed, every pair asked again): what the faster one must equal. */
  const reference = (prefills: string[], decodes: string[], ok: (p: string, d: string) => boolean): string[] => {
    const okPD = (x: string, y: string, seedIsPrefill: boolean) => (seedIsPrefill ? ok(x, y) : ok(y, x));
    let best: string[] = [];
    for (const [own, other, isPrefill] of [
      [prefills, decodes, true],
      [decodes, prefills, false],
    ] as const)
      for (const seed of own) {
        const peers = other.filter((y) => okPD(seed, y, isPrefill));
        if (peers.length === 0) continue;
        const mates = own.filter((x) => peers.every((y) => okPD(x, y, isPrefill)));
        const set = isPrefill ? [...mates, ...peers] : [...peers, ...mates];
        if (set.length > best.length) best = set;
      }
    return best;
  };

  it("equals the rule as first written on any ok relation (up to 40 × 40 engines), asking ok once per pair", () => {
    const relation = fc
      .record({
        np: fc.integer({ min: 0, max: 40 }),
        nd: fc.integer({ min: 0, max: 40 }),
        density: fc.double({ min: 0, max: 1 }),
      })
      .chain(({ np, nd, density }) =>
        fc.tuple(
          fc.constant(np),
          fc.constant(nd),
          fc.array(
            fc.double({ min: 0, max: 1, noNaN: true }).map((x) => x < density),
            { minLength: np * nd, maxLength: np * nd },
          ),
        ),
      );
    fc.assert(
      fc.property(relation, ([np, nd, cells]) => {
        const prefills = Array.from({ length: np }, (_, i) => `p${i}`);
        const decodes = Array.from({ length: nd }, (_, j) => `d${j}`);
        const asked = new Map<string, number>();
        const ok = (p: string, d: string) => {
          asked.set(`${p} ${d}`, (asked.get(`${p} ${d}`) ?? 0) + 1);
          return cells[Number(p.slice(1)) * nd + Number(d.slice(1))]!;
        };
        const fast = pairableSet(prefills, decodes, ok);
        expect(Math.max(0, ...asked.values())).toBeLessThanOrEqual(1);
        expect(fast).toEqual(reference(prefills, decodes, ok));
      }),
      { numRuns: 300 },
    );
  });
});
