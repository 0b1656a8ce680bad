// parseJsonSafely scans a text for keys given twice only when the text holds more keys than its parsed
// value (src/desired/json-safe.ts): every duplicate is still found, at any depth, beside strings that hold
// ":" and escaped quotes, under a forbidden key, and a text without one is accepted as it was.
import { describe, expect, it } from "vitest";
import { parseJsonSafely } from "../../src/desired/json-safe.js";
import { findDuplicateKeys } from "../../src/desired/json-duplicate-keys.js";

/** How many keys given twice parseJsonSafely reports in `text`. */
const duplicates = (text: string) =>
  parseJsonSafely(text, "f.json").issues.filter((i) => /given twice/.test(i.message)).length;

describe("parseJsonSafely and keys given twice", () => {
  it("finds each, wherever it is, as the full scan does", () => {
    const texts = [
      '{"a":1,"a":2}',
      '{"x":{"y":[{"k":"v:1","k":"v"}]}}',
      '{"s":"a\\":b","s":"c"}',
      '{"a":{"b":1},"a":2}',
      '{"outer":[1,{"in":{"d":1,"e":2,"d":3}}],"z":":"}',
      '{"__proto__":{"p":1,"p":2},"q":1}',
      '{"engines":{"engine-1":{"x":1},"engine-2":{"x":1},"engine-1":{"x":2}}}',
    ];
    for (const text of texts) {
      const want = findDuplicateKeys(text).length;
      expect(want, text).toBeGreaterThan(0);
      expect(duplicates(text), text).toBe(want);
    }
  });

  it("accepts a text without one, colons in its strings and keys included", () => {
    const text = JSON.stringify({ "a:b": "c:d", e: [{ 'f\\":': 1 }, { g: 'h":' }], i: { j: { k: null } } });
    expect(parseJsonSafely(text, "f.json")).toEqual({ value: JSON.parse(text), issues: [] });
  });
});
