// compareNames orders engine names by their number without building the collator (in-service.ts): the order
// must be the collator's own, on every engine name the schema allows and on anything else.
import { describe, expect, it } from "vitest";
import { compareNames, nameList } from "../../src/controller/in-service.js";

const collator = new Intl.Collator("en", { numeric: true });
const engines = Array.from({ length: 9999 }, (_, i) => `engine-${i + 1}`);

describe("compareNames", () => {
  it("orders engine names as the collator does: every name against its neighbours and a spread of others", () => {
    const others = [0, 1, 8, 9, 10, 98, 99, 100, 998, 999, 1000, 4999, 9998].map((i) => engines[i]!);
    const wrong: string[] = [];
    for (const [i, a] of engines.entries())
      for (const b of [engines[i - 1], engines[i + 1], ...others, a])
        if (b !== undefined && Math.sign(compareNames(a, b)) !== Math.sign(collator.compare(a, b)))
          wrong.push(`${a} ${b}`);
    expect(wrong).toEqual([]);
    expect(compareNames("engine-2", "engine-10")).toBeLessThan(0);
    expect(compareNames("engine-7", "engine-7")).toBe(0);
  });

  it("orders any other name (nodes, names outside the schema, one of each) by the collator", () => {
    const names = [
      "node-10",
      "Node-2",
      "node-2",
      "engine-02",
      "engine-10",
      "engine-9",
      "gpu-a",
      "engine-10000",
      "engine-0",
      "engine-",
      "engine-1a",
      "engine-/9",
      "xngine-12",
      "a_b",
      "a-b",
      "a.b",
    ];
    const wrong: string[] = [];
    for (const a of names)
      for (const b of names)
        if (Math.sign(compareNames(a, b)) !== Math.sign(collator.compare(a, b))) wrong.push(`${a} ${b}`);
    expect(wrong).toEqual([]);
    expect(nameList(["node-10", "engine-10", "node-2", "engine-9"])).toBe("engine-9, engine-10, node-2, node-10");
  });
});
