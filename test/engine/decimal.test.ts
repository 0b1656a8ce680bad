// Exact decimal budgets: the comparisons start-shared makes must not suffer
// binary floating point (0.1 + 0.2 !== 0.3 in IEEE doubles).
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  addDecimals,
  compareDecimals,
  formatDecimal,
  integerDecimal,
  multiplyDecimals,
  parseDecimal,
  type Decimal,
} from "../../src/phases/decimal.js";

const d = (s: string): Decimal => {
  const v = parseDecimal(s);
  if (!v) throw new Error(`not a decimal: ${s}`);
  return v;
};

describe("decimal arithmetic", () => {
  it("0.1 + 0.2 is exactly 0.3, which floats get wrong", () => {
    expect(0.1 + 0.2 <= 0.3).toBe(false);
    expect(compareDecimals(addDecimals([d("0.1"), d("0.2")]), d("0.3"))).toBe(0);
    expect(formatDecimal(addDecimals([d("0.1"), d("0.2")]))).toBe("0.3");
  });

  it("0.1 + 0.21 exceeds 0.3 by 0.01", () => {
    const sum = addDecimals([d("0.1"), d("0.21")]);
    expect(compareDecimals(sum, d("0.3"))).toBe(1);
    expect(formatDecimal(sum)).toBe("0.31");
  });

  it("multiplies an allowance by whole MiB exactly, and compares with an integer increase (equality passes)", () => {
    const limit = multiplyDecimals(d("0.3"), integerDecimal(81559));
    expect(formatDecimal(limit)).toBe("24467.7");
    expect(compareDecimals(integerDecimal(24467), limit)).toBe(-1);
    expect(compareDecimals(integerDecimal(24468), limit)).toBe(1);
    expect(compareDecimals(integerDecimal(300), multiplyDecimals(d("0.3"), integerDecimal(1000)))).toBe(0);
  });

  it("reads plain decimals only", () => {
    for (const bad of ["", "-0.1", "1e-3", ".5", "0.", "0x1", "NaN"]) expect(parseDecimal(bad), bad).toBeUndefined();
    expect(formatDecimal(d("0.300"))).toBe("0.3");
    expect(formatDecimal(d("2.0"))).toBe("2");
    expect(formatDecimal(d("0.05"))).toBe("0.05");
  });

  it("agrees with integer arithmetic on scaled values", () => {
    const frac = fc
      .tuple(fc.nat(10_000), fc.integer({ min: 0, max: 6 }))
      .map(([n, scale]) => ({ n, scale, text: formatDecimal({ units: BigInt(n), scale }) }));
    fc.assert(
      fc.property(fc.array(frac, { minLength: 1, maxLength: 8 }), frac, (parts, limit) => {
        const sum = addDecimals(parts.map((p) => d(p.text)));
        const exact = parts.reduce((s, p) => s + BigInt(p.n) * 10n ** BigInt(6 - p.scale), 0n);
        const lim = BigInt(limit.n) * 10n ** BigInt(6 - limit.scale);
        expect(compareDecimals(sum, d(limit.text))).toBe(exact < lim ? -1 : exact > lim ? 1 : 0);
      }),
    );
  });
});
