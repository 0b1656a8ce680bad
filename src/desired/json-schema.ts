// JSON Schemas (draft 2020-12) of desired/fleet.json and desired/engine-launch.json,
// generated from the zod schemas (schemas.ts) so the two never drift: editors
// complete and check fields from them, `narwhal schema` prints them, and
// schemas/*.schema.json are committed copies a test keeps equal.
//
// Editors see the file as written, before ${VAR} substitution (load.ts), so
// every string-valued field also accepts a complete-value "${NAME}"
// (substitute.ts): the schema cannot know a variable's value, and a field such
// as "transport": "${NARWHAL_TRANSPORT}" is valid until substitution proves
// otherwise. Numbers and booleans are never substituted (a variable's value is
// a string), and keys are not substituted, so neither accepts a placeholder.
// The "input" shape is generated: fields with a default are optional, and
// gpu_ids takes integers as well as strings (the transform's input).
import * as z from "zod";
import { EngineLaunchSchema, FleetSchema } from "./schemas.js";
import { DESIRED_SCHEMA_NAMES, type DesiredSchemaName } from "./schema-names.js";

export { DESIRED_SCHEMA_NAMES, type DesiredSchemaName };

export const DESIRED_SCHEMAS = {
  fleet: { schema: FleetSchema, id: "urn:narwhal:v1:schema:fleet", title: "narwhal desired/fleet.json" },
  launch: {
    schema: EngineLaunchSchema,
    id: "urn:narwhal:v1:schema:engine-launch",
    title: "narwhal desired/engine-launch.json",
  },
} as const satisfies Record<DesiredSchemaName, unknown>;

/** The committed copy's path, relative to the repository root (what `$schema` in a desired file points to). */
export const committedSchemaPath = (name: DesiredSchemaName) => `schemas/${name}.schema.json`;

/** substitute.ts's complete-value `${NAME}`, as a JSON Schema pattern. */
export const PLACEHOLDER_PATTERN = "^\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}$";

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** Every string-typed subschema also accepts "${NAME}"; the description stays on the outside, where editors show it. */
function allowPlaceholders(node: unknown, key?: string): unknown {
  if (Array.isArray(node)) return node.map((n) => allowPlaceholders(n));
  if (!isObject(node)) return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) {
    // Keys (propertyNames) are never substituted; `properties` maps names to subschemas.
    if (k === "propertyNames") out[k] = v;
    else if (k === "properties" && isObject(v))
      out[k] = Object.fromEntries(Object.entries(v).map(([p, s]) => [p, allowPlaceholders(s)]));
    else out[k] = allowPlaceholders(v, k);
  }
  if (out["type"] !== "string" || key === "propertyNames") return out;
  const { description, ...value } = out;
  if (Object.keys(value).length === 1) return out; // any string: "${NAME}" is one already
  return {
    ...(description === undefined ? {} : { description }),
    anyOf: [value, { type: "string", pattern: PLACEHOLDER_PATTERN, description: "${NAME} from deployment.env" }],
  };
}

/**
 * The JSON Schema of one desired file. `placeholders: false` gives the schema of the
 * document after substitution (what zod parses); the default is the file as written.
 */
export function desiredJsonSchema(name: DesiredSchemaName, opts: { placeholders?: boolean } = {}): Json {
  const { schema, id, title } = DESIRED_SCHEMAS[name];
  const generated = z.toJSONSchema(schema, { target: "draft-2020-12", io: "input", unrepresentable: "any" }) as Json;
  const { $schema, ...body } = generated;
  const shaped = opts.placeholders === false ? body : (allowPlaceholders(body) as Json);
  return { $schema, $id: id, title, ...shaped };
}
