// Python's json.dumps, byte for byte, for JSON-shaped values. The seed's group
// signature is sha256(json.dumps(inputs, sort_keys=True)) computed by Python,
// so narwhal must produce the identical bytes: ", " and ": " separators,
// ensure_ascii \uXXXX escapes (DEL included, astral characters as surrogate
// pairs), keys sorted by code point, and Python's repr() for floats.
//
// One ambiguity cannot be resolved in JavaScript: 1 and 1.0 are the same
// number here. Integral numbers are written as Python ints, which matches
// every number a launch record can hold (block_size, tensor_parallel_size).

export interface PythonJsonOptions {
  /** json.dumps(sort_keys=...). Default false (insertion order; note JS puts integer-like keys first). */
  sortKeys?: boolean;
  /** json.dumps(ensure_ascii=...). Default true, as in Python. */
  ensureAscii?: boolean;
}

/** `json.dumps(value, sort_keys=sortKeys, ensure_ascii=ensureAscii)` as Python 3 writes it. */
export function pythonJsonDumps(value: unknown, options: PythonJsonOptions = {}): string {
  const sortKeys = options.sortKeys ?? false;
  const ensureAscii = options.ensureAscii ?? true;
  const seen = new Set<object>();

  const dump = (v: unknown): string => {
    if (v === null) return "null";
    if (v === true) return "true";
    if (v === false) return "false";
    if (typeof v === "string") return pythonString(v, ensureAscii);
    if (typeof v === "number") return pythonNumber(v);
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "object") {
      if (seen.has(v)) throw new ValueError("Circular reference detected");
      seen.add(v);
      try {
        if (Array.isArray(v)) return "[" + v.map(dump).join(", ") + "]";
        let keys = Object.keys(v).filter((k) => (v as Record<string, unknown>)[k] !== undefined);
        if (sortKeys) keys = keys.sort(compareCodePoints);
        return (
          "{" +
          keys.map((k) => `${pythonString(k, ensureAscii)}: ${dump((v as Record<string, unknown>)[k])}`).join(", ") +
          "}"
        );
      } finally {
        seen.delete(v);
      }
    }
    throw new ValueError(`Object of type ${typeof v} is not JSON serializable`);
  };
  return dump(value);
}

class ValueError extends TypeError {}

/** Python's str ordering: by code point, not by UTF-16 unit. */
export function compareCodePoints(a: string, b: string): number {
  // Up to the first unit that differs both agree; there, two units that are not surrogates are the code
  // points themselves (no iterator needed: canonicalJson sorts every object's keys with this).
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  if (i > 0 && isSurrogate(a.charCodeAt(i - 1))) return compareByIterator(a, b);
  if (i === n) return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
  const [ca, cb] = [a.charCodeAt(i), b.charCodeAt(i)];
  return isSurrogate(ca) || isSurrogate(cb) ? compareByIterator(a, b) : ca - cb;
}

const isSurrogate = (c: number) => c >= 0xd800 && c <= 0xdfff;

function compareByIterator(a: string, b: string): number {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done || y.done) return x.done && y.done ? 0 : x.done ? -1 : 1;
    const cx = x.value.codePointAt(0) as number;
    const cy = y.value.codePointAt(0) as number;
    if (cx !== cy) return cx - cy;
  }
}

const SHORT_ESCAPES: Record<string, string> = {
  '"': '\\"',
  "\\": "\\\\",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\b": "\\b",
  "\f": "\\f",
};

function pythonString(s: string, ensureAscii: boolean): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const ch = s[i] as string;
    const code = s.charCodeAt(i); // UTF-16 unit: astral characters come out as surrogate pairs
    const short = SHORT_ESCAPES[ch];
    if (short !== undefined) out += short;
    else if (code < 0x20 || (ensureAscii && code > 0x7e)) out += "\\u" + code.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + '"';
}

function pythonNumber(n: number): string {
  if (Number.isNaN(n)) return "NaN";
  if (n === Infinity) return "Infinity";
  if (n === -Infinity) return "-Infinity";
  if (Number.isInteger(n)) return Math.abs(n) < 1e21 ? String(n === 0 ? 0 : n) : BigInt(n).toString();
  return pythonFloatRepr(n);
}

/** repr(float): shortest round-trip digits; exponent form when decpt <= -4 or > 16. */
export function pythonFloatRepr(n: number): string {
  if (Object.is(n, -0)) return "-0.0";
  const sign = n < 0 ? "-" : "";
  const [mant, exp] = Math.abs(n).toExponential().split("e") as [string, string];
  const digits = mant.replace(".", "");
  const decpt = Number(exp) + 1;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) return `${sign}0.${"0".repeat(-decpt)}${digits}`;
    if (decpt >= digits.length) return `${sign}${digits}${"0".repeat(decpt - digits.length)}.0`;
    return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
  }
  const e = decpt - 1;
  const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  return `${sign}${m}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
}
