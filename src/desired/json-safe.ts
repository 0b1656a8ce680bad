// Reading desired files "at the door" (DESIGN principle 5): size and depth caps
// before parsing, strict UTF-8, no BOM (the seed's Python tools read the same
// files with json.loads, which rejects a BOM), and no keys that could reach an
// object's prototype once the data is spread or merged somewhere downstream.

import { readFile, stat } from "node:fs/promises";
import type { ValidationIssue } from "../errors.js";
import { findJsonError } from "./json-error-position.js";
import { jsonPath } from "./schemas.js";

export const MAX_FILE_BYTES = 1024 * 1024;
export const MAX_JSON_DEPTH = 32;
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

export type ReadResult = { text: string; issues: [] } | { text?: undefined; issues: ValidationIssue[] };

/** Read a UTF-8 text file with the size cap; problems become issues, not throws. */
export async function readTextFile(absPath: string, file: string): Promise<ReadResult> {
  const issue = (message: string): ReadResult => ({ issues: [{ file, path: "$", message, rule: "syntax" }] });
  try {
    const st = await stat(absPath);
    if (!st.isFile()) return issue("is not a regular file");
    if (st.size > MAX_FILE_BYTES) return issue(`is ${st.size} bytes; the limit is ${MAX_FILE_BYTES} (1 MiB)`);
    const bytes = await readFile(absPath);
    if (bytes.length > MAX_FILE_BYTES) return issue(`is larger than ${MAX_FILE_BYTES} bytes (1 MiB)`);
    if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
      return issue("starts with a UTF-8 byte-order mark; save it as UTF-8 without BOM");
    }
    try {
      return { text: new TextDecoder("utf-8", { fatal: true }).decode(bytes), issues: [] };
    } catch {
      return issue("is not valid UTF-8");
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return issue("is missing; create it (see examples/)");
    return issue(`cannot be read (${code ?? String(err)})`);
  }
}

/** Parse JSON text with depth and key checks. Issues carry line:column where known. */
export function parseJsonSafely(text: string, file: string): { value?: unknown; issues: ValidationIssue[] } {
  const issue = (message: string, path = "$"): ValidationIssue => ({ file, path, message, rule: "syntax" });
  if (text.trim() === "") return { issues: [issue("is empty; it must hold a JSON object")] };

  const tooDeep = findExcessiveDepth(text);
  if (tooDeep !== undefined) {
    return { issues: [issue(`nests deeper than ${MAX_JSON_DEPTH} levels (at ${lineCol(text, tooDeep)})`)] };
  }
  let value: unknown;
  try {
    // JSON.parse defines "__proto__" as an own property, never as a prototype,
    // so parsing itself is safe; the walk below then rejects such keys.
    value = JSON.parse(text);
  } catch (err) {
    return { issues: [issue(describeSyntaxError(text, err as Error))] };
  }
  const issues: ValidationIssue[] = [];
  walkKeys(value, [], (segments, key) => {
    issues.push(issue(`key "${key}" is not allowed (it could alter object prototypes); rename it`, jsonPath([...segments, key])));
  });
  return issues.length > 0 ? { issues } : { value, issues };
}

function walkKeys(value: unknown, segments: PropertyKey[], onForbidden: (segments: PropertyKey[], key: string) => void): void {
  if (Array.isArray(value)) {
    value.forEach((v, i) => walkKeys(v, [...segments, i], onForbidden));
  } else if (value !== null && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) {
      if (FORBIDDEN_KEYS.has(k)) onForbidden(segments, k);
      else walkKeys(v, [...segments, k], onForbidden);
    }
  }
}

/** Offset of the first bracket that exceeds MAX_JSON_DEPTH, scanning outside strings. */
function findExcessiveDepth(text: string): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") {
      if (++depth > MAX_JSON_DEPTH) return i;
    } else if (c === "}" || c === "]") depth--;
  }
  return undefined;
}

function describeSyntaxError(text: string, err: Error): string {
  const at = findJsonError(text);
  if (!at) return `is not valid JSON: ${err.message.slice(0, 200)}`;
  if (at.offset >= text.trimEnd().length) {
    return "is truncated: the JSON ends before its last value or bracket is complete";
  }
  return `is not valid JSON at ${lineCol(text, at.offset)}: ${at.reason}`;
}

function lineCol(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const col = offset - before.lastIndexOf("\n");
  return `line ${line} column ${col}`;
}
