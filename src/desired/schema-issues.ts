// zod issues → ValidationIssue, in the operator's words. zod knows what was
// wrong with a value but not what the field is for; the schema does (its
// .describe() text), so a missing field says which field and what it holds,
// and an unknown field names the field it most likely misspells.

import type { z } from "zod";
import type { ValidationIssue } from "../errors.js";
import { closestName } from "./did-you-mean.js";
import { jsonPath } from "./schemas.js";

/** The minimal view of a zod schema this walk needs (zod 4's public `def`, `shape`, ...). */
interface SchemaNode {
  readonly def: {
    readonly type: string;
    readonly entries?: Record<string, unknown>;
    readonly values?: readonly unknown[];
  };
  readonly description?: string | undefined;
  readonly shape?: Record<string, SchemaNode>;
  readonly element?: SchemaNode;
  readonly valueType?: SchemaNode;
  readonly in?: SchemaNode;
  unwrap?(): SchemaNode;
}

/** Strip optional/default/nullable/transform wrappers down to the schema that holds the value's shape. */
function unwrap(node: SchemaNode): SchemaNode {
  let n = node;
  for (let i = 0; i < 16; i++) {
    if (
      n.unwrap &&
      ["optional", "default", "nullable", "prefault", "nonoptional", "readonly", "catch"].includes(n.def.type)
    )
      n = n.unwrap();
    else if (n.def.type === "pipe" && n.in) n = n.in;
    else break;
  }
  return n;
}

/** The schema for the value at `path`, as written (wrappers kept, so its description is there), if the path leads anywhere. */
export function schemaAt(schema: z.ZodType, path: ReadonlyArray<PropertyKey>): SchemaNode | undefined {
  let node: SchemaNode | undefined = schema as unknown as SchemaNode;
  for (const segment of path) {
    if (node === undefined) return undefined;
    const inner = unwrap(node);
    if (inner.def.type === "object" && inner.shape && typeof segment === "string")
      node = Object.hasOwn(inner.shape, segment) ? inner.shape[segment] : undefined;
    else if (inner.def.type === "array" && typeof segment === "number") node = inner.element;
    else if (inner.def.type === "record") node = inner.valueType;
    else return undefined;
  }
  return node;
}

/** Field names an object schema at `path` accepts (empty when it is not an object). */
function fieldsAt(schema: z.ZodType, path: ReadonlyArray<PropertyKey>): string[] {
  const node = schemaAt(schema, path);
  const inner = node && unwrap(node);
  return inner?.def.type === "object" && inner.shape ? Object.keys(inner.shape) : [];
}

/** True when `path` names a key its parent object in `input` does not have. */
function isMissing(input: unknown, path: ReadonlyArray<PropertyKey>): boolean {
  if (path.length === 0) return false;
  let v: unknown = input;
  for (const segment of path.slice(0, -1)) {
    if (v === null || typeof v !== "object" || !Object.hasOwn(v, segment)) return false;
    v = (v as Record<PropertyKey, unknown>)[segment];
  }
  return (
    v !== null && typeof v === "object" && !Array.isArray(v) && !Object.hasOwn(v, path[path.length - 1] as PropertyKey)
  );
}

/** What a schema node expects, for a missing field's message ("a string", `"native" or "container"`, ...). */
function kindOf(node: SchemaNode): string {
  const { def } = unwrap(node);
  const allowed =
    def.type === "enum" ? Object.values(def.entries ?? {}) : def.type === "literal" ? [...(def.values ?? [])] : [];
  if (allowed.length > 0) return allowed.map((v) => JSON.stringify(v)).join(" or ");
  const kinds: Record<string, string> = {
    string: "a string",
    number: "a number",
    int: "an integer",
    boolean: "true or false",
    object: "an object",
    record: "an object",
    array: "a list",
  };
  return kinds[def.type] ?? "a value";
}

/**
 * zod issues → ValidationIssue with `$.a.b[0]` paths. `schema` and `input` are
 * what was parsed: unknown keys get one issue each with a suggestion, and a
 * missing field is described from the schema rather than as "received undefined".
 */
export function zodIssues(file: string, error: z.ZodError, schema: z.ZodType, input: unknown): ValidationIssue[] {
  return error.issues.flatMap((i) => {
    if (i.code === "unrecognized_keys") {
      const known = fieldsAt(schema, i.path);
      return i.keys.map((k) => {
        const meant = closestName(k, known);
        const message =
          meant === undefined
            ? `unknown field "${k}"; remove it or check its spelling`
            : `unknown field "${k}"; did you mean "${meant}"? Rename it`;
        return { file, path: jsonPath([...i.path, k]), rule: "schema", message };
      });
    }
    if (i.code === "invalid_key") {
      // A record key that fails its pattern: say what the key must look like, not zod's "Invalid key in record".
      const why = i.issues.map((k) => k.message).join("; ");
      return [
        {
          file,
          path: jsonPath(i.path),
          message: `key ${JSON.stringify(String(i.path[i.path.length - 1]))} is not allowed: ${why}`,
          rule: "schema",
        },
      ];
    }
    const node = schemaAt(schema, i.path);
    if (node && isMissing(input, i.path)) {
      const field = String(i.path[i.path.length - 1]);
      const what = node.description ? `: ${node.description}` : "";
      return [
        {
          file,
          path: jsonPath(i.path),
          rule: "schema",
          message: `required field "${field}" is missing (${kindOf(node)})${what}; add it`,
        },
      ];
    }
    return [{ file, path: jsonPath(i.path), message: i.message, rule: "schema" }];
  });
}
