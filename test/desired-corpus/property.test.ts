// Property: whatever JSON (or env text) lands in desired/ — arbitrary values,
// objects whose keys are "__proto__", "constructor" or "prototype" as
// JSON.parse creates them, huge or deep documents, odd unicode, valid trees
// with one subtree replaced by garbage — validateDesired never throws, always
// answers with a state or with issues that name a desired file, and never
// changes Object.prototype.
import fc from "fast-check";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { validateDesired } from "../../src/desired/load.js";
import { envText, validTree, type Json, type Obj } from "../desired/fixtures.js";
import { FILE_NAMES, freshDir, removeTree } from "./tree.js";

const KEYS = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "valueOf",
  "hasOwnProperty",
  "__defineGetter__",
  "polluted",
  "engines",
  "engine-1",
  "engine-2",
  "nodes",
  "hardware",
  "runtime",
  "environment",
  "extra_args",
  "gpu_ids",
  "iid",
  "url",
  "role",
];

const oddString = fc.oneof(
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.string({ unit: "grapheme", maxLength: 8 }),
  // Lone surrogates, as JSON escapes produce them.
  fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
  fc.constantFrom(
    "${NARWHAL_NODE_1_URL}",
    "${NARWHAL_ENGINE_API_KEY}",
    "${X",
    "--port",
    "-tp",
    "../..",
    "/etc/passwd",
    "\u0000",
    "a\nb",
    "\u202e",
    "\ufeff",
  ),
);
const key = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...KEYS) }, { weight: 1, arbitrary: oddString });

/** JSON *text*, so keys such as "__proto__" appear literally and JSON.parse makes them own properties. */
const { json: jsonText } = fc.letrec<{ json: string; array: string; object: string }>((tie) => ({
  json: fc.oneof(
    { depthSize: "small", maxDepth: 5 },
    fc.constantFrom("null", "true", "false", "0", "-0", "1e400", "-1e400", "16", "1.5", "9007199254740993", '""'),
    fc.integer().map(String),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
    oddString.map((s) => JSON.stringify(s)),
    tie("array"),
    tie("object"),
  ),
  array: fc.array(tie("json"), { maxLength: 4 }).map((xs) => `[${xs.join(",")}]`),
  object: fc
    .array(fc.tuple(key, tie("json")), { maxLength: 5 })
    .map((es) => `{${es.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(",")}}`),
}));

const deep = fc
  .integer({ min: 25, max: 40 })
  .chain((n) => fc.constantFrom("[".repeat(n) + "]".repeat(n), '{"a":'.repeat(n) + "1" + "}".repeat(n)));
const HUGE = JSON.stringify({ engines: { "engine-1": { sources: { x: "é".repeat(600 * 1024) } } } }); // ~1.2 MB in UTF-8

/** Every path of a valid document, so a valid tree can have any one subtree replaced. */
function paths(v: Json, at: Array<string | number> = []): Array<Array<string | number>> {
  const out = [at];
  if (Array.isArray(v)) v.forEach((x, i) => out.push(...paths(x, [...at, i])));
  else if (v !== null && typeof v === "object")
    for (const [k, x] of Object.entries(v)) out.push(...paths(x, [...at, k]));
  return out;
}
function replaced(doc: Obj, path: Array<string | number>, text: string): string {
  if (path.length === 0) return text;
  const copy = structuredClone(doc) as Json;
  let parent = copy as Record<string | number, Json>;
  for (const seg of path.slice(0, -1)) parent = parent[seg] as Record<string | number, Json>;
  // JSON.parse defines every key (including "__proto__") as an own property; so does defineProperty.
  Object.defineProperty(parent, path[path.length - 1] as string | number, {
    value: JSON.parse(text) as Json,
    enumerable: true,
    writable: true,
    configurable: true,
  });
  return JSON.stringify(copy);
}

const base = validTree();
const documentFor = (doc: Obj) =>
  fc.oneof(
    { weight: 4, arbitrary: fc.tuple(fc.constantFrom(...paths(doc)), jsonText).map(([p, t]) => replaced(doc, p, t)) },
    { weight: 3, arbitrary: jsonText },
    { weight: 1, arbitrary: deep },
    { weight: 1, arbitrary: fc.constant(JSON.stringify(doc)) },
    { weight: 1, arbitrary: fc.constantFrom(HUGE, "", "{", "\ufeff{}", '{"a":1,"a":2}') },
  );

const envLine = fc.oneof(
  fc.constantFrom(...envText(base.env).trim().split("\n")),
  fc
    .tuple(
      fc.constantFrom(
        "__proto__",
        "constructor",
        "prototype",
        "NARWHAL_ENGINE_PORT",
        "NARWHAL_NODE_1_IP",
        "NARWHAL_ENGINE_API_KEY",
      ),
      oddString,
    )
    .map(([k, v]) => `${k}=${v}`),
  fc
    .tuple(fc.constantFrom("NARWHAL_X", "NARWHAL_NODE_2_URL"), oddString)
    .map(([k, v]) => `${k}="${v.replace(/["\\]/g, "")}\\n"`),
  oddString,
);
const envFile = fc.oneof(
  { weight: 4, arbitrary: fc.array(envLine, { maxLength: 20 }).map((ls) => ls.join("\n")) },
  { weight: 1, arbitrary: fc.constant(envText(base.env)) },
);

const snapshot = () =>
  Object.fromEntries(
    Object.getOwnPropertyNames(Object.prototype).map((n) => [n, (Object.prototype as Record<string, unknown>)[n]]),
  );
const FILES = new Set(Object.values(FILE_NAMES));

describe("validateDesired on arbitrary input", () => {
  it("never throws and never pollutes Object.prototype", async () => {
    const before = snapshot();
    const names = Object.getOwnPropertyNames(Object.prototype).sort();
    const dir = await freshDir("narwhal-prop-");
    let valid = 0;
    let runs = 0;
    try {
      await fc.assert(
        // Mostly one file broken and the others valid, so the schemas, rules and spec builder see the garbage too.
        fc.asyncProperty(
          fc.constantFrom("fleet", "launch", "env", "all", "none"),
          documentFor(base.fleet),
          documentFor(base.launch),
          envFile,
          async (target, f, l, e) => {
            runs++;
            const keep = (k: string) => target !== "all" && target !== k;
            const fleet = keep("fleet") ? JSON.stringify(base.fleet) : f;
            const launch = keep("launch") ? JSON.stringify(base.launch) : l;
            const env = keep("env") ? envText(base.env) : e;
            await writeFile(join(dir, FILE_NAMES.fleet), fleet);
            await writeFile(join(dir, FILE_NAMES.launch), launch);
            await writeFile(join(dir, FILE_NAMES.env), env);
            const result = await validateDesired(dir);
            expect(Array.isArray(result.issues)).toBe(true);
            if (result.state) {
              valid++;
              expect(result.issues).toEqual([]);
            } else {
              expect(result.issues.length).toBeGreaterThan(0);
              for (const i of result.issues) {
                expect(FILES.has(i.file)).toBe(true);
                expect(typeof i.path).toBe("string");
              }
            }
            expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
            expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(names);
            expect(snapshot()).toEqual(before);
            expect(Object.getPrototypeOf({})).toBe(Object.prototype);
            expect(Object.getOwnPropertyNames(Array.prototype)).not.toContain("polluted");
          },
        ),
        { numRuns: 600 },
      );
    } finally {
      await removeTree(dir);
    }
    console.log(
      `property: ${runs} arbitrary desired trees, ${valid} of them valid, none threw or touched Object.prototype`,
    );
  }, 90_000);
});
