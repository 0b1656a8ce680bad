// compareCodePoints orders strings as Python's str does, by code point: its UTF-16 fast path
// (python-json.ts) agrees with a walk by code points, surrogates (paired or lone) included.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compareCodePoints } from "../../src/desired/python-json.js";

/** By code point, one at a time: what the fast path must agree with. */
function byCodePoints(a: string, b: string): number {
  const [x, y] = [[...a], [...b]];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

const unit = fc.constantFrom("a", "z", "\uD800", "\uDBFF", "\uDC00", "\uDFFF", "\uE000", "\uFFFF", "\uD83D\uDE00", "é");
const text = fc.array(unit, { maxLength: 6 }).map((units) => units.join(""));

describe("compareCodePoints", () => {
  it("agrees in sign with the order by code points", () => {
    fc.assert(
      fc.property(text, text, (a, b) => Math.sign(compareCodePoints(a, b)) === Math.sign(byCodePoints(a, b))),
      { numRuns: 20_000 },
    );
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), fc.string({ unit: "binary" }), (a, b) => {
        return Math.sign(compareCodePoints(a, b)) === Math.sign(byCodePoints(a, b));
      }),
    );
  });

  it("puts an astral character after U+FFFF, unlike UTF-16 order", () => {
    expect(compareCodePoints("\uD83D\uDE00", "\uFFFF")).toBeGreaterThan(0);
    expect(["\uFFFF", "\uD83D\uDE00", "a", "ab", ""].sort(compareCodePoints)).toEqual([
      "",
      "a",
      "ab",
      "\uFFFF",
      "\uD83D\uDE00",
    ]);
  });
});
