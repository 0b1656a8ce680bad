// engine-launch.json's schema, one distinct record at a time. A fleet's launch
// records mostly repeat each other (1000 engines, a handful of distinct
// records, differing in a GPU index at most), and the schema's parse of a
// record was the largest part of validating them. A record equal to one
// already parsed (the same JSON) gets a copy of that parse, which is what the
// schema would give it: it is a pure function of the record. Anything else,
// a record that fails or a document of another shape, is parsed whole by the
// schema as before, so the issues are exactly the schema's.

import type { z } from "zod";
import { ENGINE_NAME_PATTERN, EngineLaunchSchema, LaunchRecordSchema, type ParsedLaunchRecord } from "./schemas.js";

type LaunchParse = z.ZodSafeParseResult<z.output<typeof EngineLaunchSchema>>;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v) && Object.getPrototypeOf(v) === Object.prototype;

/** EngineLaunchSchema.safeParse(doc), parsing each distinct record once. `doc` is JSON data (parsed, substituted). */
export function parseLaunchDocument(doc: unknown): LaunchParse {
  return byRecord(doc) ?? EngineLaunchSchema.safeParse(doc);
}

/** The parse of a document of the usual shape whose every record passes; undefined for anything else. */
function byRecord(doc: unknown): LaunchParse | undefined {
  if (!isPlainObject(doc)) return undefined;
  const keys = Object.keys(doc);
  if (!keys.every((k) => k === "$schema" || k === "engines")) return undefined;
  if ("$schema" in doc && typeof doc["$schema"] !== "string") return undefined;
  const records = doc["engines"];
  if (!isPlainObject(records)) return undefined;
  const names = Object.keys(records);
  if (names.length === 0) return undefined;
  const parsed = new Map<string, ParsedLaunchRecord>();
  const engines: Record<string, ParsedLaunchRecord> = {};
  for (const name of names) {
    if (!ENGINE_NAME_PATTERN.test(name)) return undefined;
    const record = records[name];
    const key = JSON.stringify(record);
    let data = parsed.get(key);
    if (data === undefined) {
      const r = LaunchRecordSchema.safeParse(record);
      if (!r.success) return undefined;
      parsed.set(key, (data = r.data));
      engines[name] = data;
    } else engines[name] = structuredClone(data);
  }
  // Key order as the schema gives it: its shape's ($schema, engines), each present in the document.
  const data = "$schema" in doc ? { $schema: doc["$schema"] as string, engines } : { engines };
  return { success: true, data } as LaunchParse;
}
