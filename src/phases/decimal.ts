// Exact decimal arithmetic for GPU budgets: "0.1" + "0.2" must equal "0.3",
// which IEEE floats get wrong. A value is an integer scaled by 10^scale, held
// as a BigInt; only what shared startup needs (parse, add, multiply, compare,
// print) is here, so no dependency is pulled in for it.

export interface Decimal {
  /** The value times 10^scale. */
  units: bigint;
  scale: number;
}

const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

/** Parse a plain non-negative decimal ("0.3", "1", "0.125"); undefined for anything else (signs, exponents). */
export function parseDecimal(text: string): Decimal | undefined {
  const m = DECIMAL.exec(text.trim());
  if (!m) return undefined;
  const fraction = m[2] ?? "";
  return { units: BigInt(m[1]! + fraction), scale: fraction.length };
}

function rescale(d: Decimal, scale: number): bigint {
  return d.units * 10n ** BigInt(scale - d.scale);
}

export function addDecimals(values: Decimal[]): Decimal {
  const scale = Math.max(0, ...values.map((v) => v.scale));
  return { units: values.reduce((sum, v) => sum + rescale(v, scale), 0n), scale };
}

export function multiplyDecimals(a: Decimal, b: Decimal): Decimal {
  return { units: a.units * b.units, scale: a.scale + b.scale };
}

/** -1, 0 or 1 as a is less than, equal to or greater than b. */
export function compareDecimals(a: Decimal, b: Decimal): -1 | 0 | 1 {
  const scale = Math.max(a.scale, b.scale);
  const x = rescale(a, scale);
  const y = rescale(b, scale);
  return x < y ? -1 : x > y ? 1 : 0;
}

export function integerDecimal(n: number | bigint): Decimal {
  return { units: BigInt(n), scale: 0 };
}

/** Canonical text: no trailing fractional zeros ("0.30" → "0.3", "2.0" → "2"). */
export function formatDecimal(d: Decimal): string {
  const negative = d.units < 0n;
  const digits = (negative ? -d.units : d.units).toString().padStart(d.scale + 1, "0");
  const whole = digits.slice(0, digits.length - d.scale);
  const fraction = digits.slice(digits.length - d.scale).replace(/0+$/, "");
  return `${negative ? "-" : ""}${whole}${fraction ? `.${fraction}` : ""}`;
}
