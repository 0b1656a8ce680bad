import { describe, expect, it } from "vitest";
import { PairCount } from "../../src/controller/pair-count.js";

const pairs = (...names: Array<[string, string]>) => names.map(([prefill, decode]) => ({ prefill, decode }));

describe("PairCount", () => {
  it("says whether some pair stands without the named engines", () => {
    const count = new PairCount(pairs(["p1", "d1"], ["p1", "d2"], ["p2", "d2"]));
    expect(count.standsWithout()).toBe(true);
    expect(count.standsWithout(["p1"])).toBe(true); // p2 → d2
    expect(count.standsWithout(["p1", "p2"])).toBe(false);
    expect(count.standsWithout(["d2"])).toBe(true); // p1 → d1
    expect(count.standsWithout(["d1", "d2"])).toBe(false);
    // A pair of two named engines is one pair, not two: p1 → d2 counted once.
    expect(count.standsWithout(["p1", "d2"])).toBe(false);
    expect(count.standsWithout(["unknown"])).toBe(true);
  });

  it("keeps engines taken out out of every later answer, each taken once", () => {
    const count = new PairCount(pairs(["p1", "d1"], ["p2", "d2"], ["p2", "d1"]));
    count.takeOut("d1");
    count.takeOut("d1");
    expect(count.standsWithout()).toBe(true); // p2 → d2
    expect(count.standsWithout(["d1"])).toBe(true);
    expect(count.standsWithout(["p2"])).toBe(false);
    count.takeOut("d2");
    expect(count.standsWithout()).toBe(false);
  });

  it("stands for nothing when it holds no pair", () => {
    expect(new PairCount([]).standsWithout()).toBe(false);
  });
});
