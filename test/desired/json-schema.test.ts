// The JSON Schemas `narwhal schema` prints (src/desired/json-schema.ts) checked
// with a real draft 2020-12 validator (ajv): the committed copies equal the
// generated ones, the default tree and every example validate and point at them
// with $schema, and schema and zod agree on the bad-input corpus but for the
// cases listed below, each with why a JSON Schema cannot say what zod says.
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv2020 } from "ajv/dist/2020.js";
import { afterAll, describe, expect, it } from "vitest";
import { DESIRED_SCHEMA_NAMES, committedSchemaPath, desiredJsonSchema } from "../../src/desired/json-schema.js";
import { validateDesired } from "../../src/desired/load.js";
import { readRegularFile } from "../../src/state/atomic-file.js";
import { validTree } from "./fixtures.js";
import { CORPUS, writeCase } from "../desired-corpus/corpus.js";
import { FILE_NAMES, freshDir, removeTree, writeDesired } from "../desired-corpus/tree.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const FILE_OF = { fleet: FILE_NAMES.fleet, launch: FILE_NAMES.launch } as const;

const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true });
const validators = Object.fromEntries(
  DESIRED_SCHEMA_NAMES.map((n) => [n, ajv.compile(desiredJsonSchema(n))] as const),
) as Record<(typeof DESIRED_SCHEMA_NAMES)[number], ReturnType<typeof ajv.compile>>;

/** The default tree and every example: each directory holding a fleet.json. */
async function desiredTrees(): Promise<string[]> {
  const examples = await readdir(join(ROOT, "examples"), { withFileTypes: true });
  const dirs = examples.filter((e) => e.isDirectory()).map((e) => join(ROOT, "examples", e.name));
  const withFleet: string[] = [join(ROOT, "desired")];
  for (const d of dirs) if ((await readdir(d)).includes(FILE_NAMES.fleet)) withFleet.push(d);
  return withFleet;
}

/**
 * Corpus cases where zod rejects a file the JSON Schema accepts, and why no JSON
 * Schema can say it: the value is judged only after ${VAR} substitution, or zod
 * runs a refinement the generated schema does not carry.
 */
const SCHEMA_ACCEPTS_ZOD_REJECTS: Record<string, string> = {
  "newline reaching an environment value through ${VAR} / engine-launch.json":
    "the newline is in deployment.env's value; the file holds a valid ${NAME} the schema cannot look through",
};

describe("narwhal schema: the generated JSON Schemas", () => {
  it("are draft 2020-12 with an $id and carry the zod .describe() texts", () => {
    for (const name of DESIRED_SCHEMA_NAMES) {
      const s = desiredJsonSchema(name);
      expect(s["$schema"]).toBe("https://json-schema.org/draft/2020-12/schema");
      expect(s["$id"]).toMatch(/^urn:narwhal:v1:schema:/);
      expect(ajv.validateSchema(s)).toBe(true);
    }
    const fleet = desiredJsonSchema("fleet") as { properties: Record<string, { description?: string }> };
    expect(fleet.properties["nodes"]?.description).toBe("Hosts and the engines each runs");
  });

  it("equal the committed copies the desired files point at", async () => {
    for (const name of DESIRED_SCHEMA_NAMES) {
      const committed = JSON.parse(await readFile(join(ROOT, committedSchemaPath(name)), "utf8")) as unknown;
      expect(committed, `${committedSchemaPath(name)}: regenerate with narwhal schema ${name}`).toEqual(
        desiredJsonSchema(name),
      );
    }
  });

  it("accept the default tree and every example, each pointing at the committed schema with $schema", async () => {
    const trees = await desiredTrees();
    expect(trees.length).toBeGreaterThanOrEqual(5);
    for (const dir of trees)
      for (const name of DESIRED_SCHEMA_NAMES) {
        const file = join(dir, FILE_OF[name]);
        const doc = JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
        expect(resolve(dir, String(doc["$schema"])), `${relative(ROOT, file)} $schema`).toBe(
          join(ROOT, committedSchemaPath(name)),
        );
        const ok = validators[name](doc);
        expect(ok, `${relative(ROOT, file)}: ${ajv.errorsText(validators[name].errors)}`).toBe(true);
      }
  });

  it("accept ${NAME} in a string field, not in a number field", () => {
    const launch = validators.launch;
    const rec = (over: Record<string, unknown>) => ({ engines: { "engine-1": { ...baseRecord(), ...over } } });
    expect(launch(rec({ network_mode: "${NARWHAL_NETWORK_MODE}" }))).toBe(true);
    expect(launch(rec({ network_mode: "bridge" }))).toBe(false);
    expect(launch(rec({ tensor_parallel_size: "${NARWHAL_TP}" }))).toBe(false);
    expect(launch(rec({ role: "${HALF}-baked" }))).toBe(false);
  });
});

const made: string[] = [];
afterAll(async () => {
  for (const dir of made) await removeTree(dir);
});

describe("the JSON Schema and zod agree on the corpus", () => {
  it("on the valid base tree", async () => {
    const dir = await freshDir();
    made.push(dir);
    const tree = validTree();
    await writeDesired(dir, tree);
    expect((await validateDesired(dir)).issues).toEqual([]);
    expect(validators.fleet(tree.fleet)).toBe(true);
    expect(validators.launch(tree.launch)).toBe(true);
  });

  it.each(CORPUS.map((c) => [c.name, c] as const))("%s", async (name, c) => {
    const dir = await freshDir();
    made.push(dir);
    await writeCase(c, dir, validTree());
    const issues = (await validateDesired(dir)).issues;
    for (const schemaName of DESIRED_SCHEMA_NAMES) {
      const file = FILE_OF[schemaName];
      // A file that is not a readable, well-formed JSON document (syntax issues: not UTF-8, too deep,
      // __proto__, a FIFO, ...) never reaches zod: neither schema gets to judge it.
      if (issues.some((i) => i.file === file && i.rule === "syntax")) continue;
      const read = await readRegularFile(join(dir, file));
      if (read.kind !== "text") continue;
      const doc = JSON.parse(read.text) as unknown;
      const zodRejects = issues.some((i) => i.file === file && i.rule === "schema");
      const schemaRejects = !validators[schemaName](doc);
      const known = SCHEMA_ACCEPTS_ZOD_REJECTS[`${name} / ${file}`];
      if (known) {
        expect([zodRejects, schemaRejects], `listed as: ${known}`).toEqual([true, false]);
        continue;
      }
      expect(
        schemaRejects,
        `${file}: zod ${zodRejects ? "rejects" : "accepts"}; ajv: ${ajv.errorsText(validators[schemaName].errors)}`,
      ).toBe(zodRejects);
    }
  });
});

function baseRecord(): Record<string, unknown> {
  return (validTree().launch["engines"] as Record<string, Record<string, unknown>>)["engine-1"] as Record<
    string,
    unknown
  >;
}
