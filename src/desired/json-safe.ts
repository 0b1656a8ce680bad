// Reading desired files "at the door" (DESIGN principle 5): size and depth caps
// before parsing, strict UTF-8, no BOM (the seed's Python tools read the same
// files with json.loads, which rejects a BOM), no NUL characters, no keys
// that could reach an object's prototype once the data is spread or merged
// somewhere downstream, and no key given twice in one object.
//
// A desired file is read only from inside the desired directory: a symlink
// may point elsewhere *within* the tree (Kubernetes ConfigMap volumes link
// fleet.json → ..data/fleet.json), never out of it, so a tree cannot make
// narwhal read — and echo into its error messages — an arbitrary host file.

import { constants, type Stats } from "node:fs";
import { lstat, open, readlink, realpath, type FileHandle } from "node:fs/promises";
import { dirname, isAbsolute, relative, sep } from "node:path";
import type { ValidationIssue } from "../errors.js";
import { findDuplicateKeys } from "./json-duplicate-keys.js";
import { findJsonError } from "./json-error-position.js";
import { jsonPath } from "./schemas.js";
import { FLAT_CAP, oversized, type SizeCap } from "./size-caps.js";

export { MAX_FILE_BYTES } from "./size-caps.js";
export const MAX_JSON_DEPTH = 32;
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

export type ReadResult = { text: string; issues: [] } | { text?: undefined; issues: ValidationIssue[] };

/** `p` lies strictly inside directory `root` (both already real paths). */
function isInside(root: string, p: string): boolean {
  const rel = relative(root, p);
  return rel !== "" && !isAbsolute(rel) && rel.split(sep)[0] !== "..";
}

function kindOf(st: Stats): string {
  if (st.isDirectory()) return "a directory";
  if (st.isFIFO()) return "a named pipe";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device";
  return "not a regular file";
}

/**
 * Read a UTF-8 text file within its size cap; problems become issues, not throws.
 * `root` is the desired directory the file must resolve inside (default: its own directory).
 */
export async function readTextFile(
  absPath: string,
  file: string,
  root = dirname(absPath),
  cap: SizeCap = FLAT_CAP,
): Promise<ReadResult> {
  const issue = (message: string): ReadResult => ({ issues: [{ file, path: "$", message, rule: "syntax" }] });
  let fh: FileHandle | undefined;
  try {
    let target = absPath;
    if ((await lstat(absPath)).isSymbolicLink()) {
      const link = await readlink(absPath);
      let real: string;
      try {
        real = await realpath(absPath);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOENT")
          return issue(
            `is a symbolic link to ${link}, which does not exist; point it at a file inside the desired directory`,
          );
        return issue(`is a symbolic link to ${link} that cannot be resolved (${code ?? String(err)})`);
      }
      const realRoot = await realpath(root);
      if (!isInside(realRoot, real)) {
        return issue(
          `is a symbolic link to ${link}, outside the desired directory; narwhal reads desired state only from inside it, so copy the file in`,
        );
      }
      target = real;
    }
    // O_NOFOLLOW: the file must not turn into a symlink between the check and
    // the open; O_NONBLOCK: a named pipe must not block the controller.
    fh = await open(target, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const st = await fh.stat();
    if (!st.isFile()) return issue(`is ${kindOf(st)}, not a regular file`);
    if (st.size > cap.bytes) return issue(oversized(st.size, cap));
    const bytes = await readCapped(fh, cap.bytes, st.size);
    if (bytes.length > cap.bytes)
      return issue(`grew while being read past its limit of ${cap.bytes} bytes (${cap.why})`);
    if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
      return issue("starts with a UTF-8 byte-order mark; save it as UTF-8 without BOM");
    }
    let text: string;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      return issue("is not valid UTF-8");
    }
    const nul = text.indexOf("\0");
    if (nul >= 0) return issue(`contains a NUL byte at ${lineCol(text, nul)}; desired files are text`);
    return { text, issues: [] };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return issue("is missing; create it (see examples/)");
    if (code === "ELOOP") return issue("became a symbolic link while being read; save it again");
    return issue(`cannot be read (${code ?? String(err)})`);
  } finally {
    await fh?.close();
  }
}

/**
 * At most `max` + 1 bytes: a file that grows while read is still caught. The buffer starts at the
 * stat size (a generous per-engine cap must not cost its full size on every read) and grows if the file does.
 */
async function readCapped(fh: FileHandle, max: number, size: number): Promise<Buffer> {
  let buf = Buffer.alloc(Math.min(size, max) + 1);
  let n = 0;
  for (;;) {
    const { bytesRead } = await fh.read(buf, n, buf.length - n, n);
    if (bytesRead === 0) break;
    n += bytesRead;
    if (n === max + 1) break;
    if (n === buf.length) buf = Buffer.concat([buf, Buffer.alloc(Math.min(buf.length, max + 1 - buf.length))]);
  }
  return buf.subarray(0, n);
}

/** Parse JSON text with depth, key and NUL checks. Issues carry line:column where known. */
export function parseJsonSafely(text: string, file: string): { value?: unknown; issues: ValidationIssue[] } {
  const issue = (message: string, path = "$"): ValidationIssue => ({ file, path, message, rule: "syntax" });
  if (text.trim() === "") return { issues: [issue("is empty; it must hold a JSON object")] };

  const { tooDeep, keys } = scanOutsideStrings(text);
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
  const parsedKeys = walk(value, [], {
    forbiddenKey: (segments, key) =>
      issues.push(
        issue(
          `key "${key}" is not allowed (it could alter object prototypes); rename it`,
          jsonPath([...segments, key]),
        ),
      ),
    nul: (segments) =>
      issues.push(
        issue(
          "contains a NUL character (\\u0000); no argument, path or environment value can hold one",
          jsonPath(segments),
        ),
      ),
  });
  // A key given twice is one key of the parsed object: only a text with more keys than its value holds
  // has one, and only then is the text scanned for where (at 1000 engines, 27 ms a command).
  for (const d of parsedKeys === keys ? [] : findDuplicateKeys(text)) {
    issues.push(
      issue(
        `key "${d.key}" is given twice in one object (at ${lineCol(text, d.firstOffset)} and ${lineCol(text, d.offset)}); ` +
          "JSON readers keep only the last, so remove or rename one",
        jsonPath([...d.segments, d.key]),
      ),
    );
  }
  return issues.length > 0 ? { issues } : { value, issues };
}

interface WalkHandlers {
  forbiddenKey(segments: PropertyKey[], key: string): void;
  nul(segments: PropertyKey[]): void;
}

/**
 * `segments` is one stack for the whole walk (a copy per value cost more than the checks); handlers get copies.
 * Returns how many keys the value's objects hold, all of them (a forbidden key's value is not walked).
 */
function walk(value: unknown, segments: PropertyKey[], on: WalkHandlers): number {
  let keys = 0;
  if (typeof value === "string") {
    if (value.includes("\0")) on.nul([...segments]);
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => {
      segments.push(i);
      keys += walk(v, segments, on);
      segments.pop();
    });
  } else if (value !== null && typeof value === "object") {
    for (const k of Object.keys(value)) {
      keys++;
      if (FORBIDDEN_KEYS.has(k)) on.forbiddenKey([...segments], k);
      else if (k.includes("\0")) on.nul([...segments, k]);
      else {
        segments.push(k);
        keys += walk((value as Record<string, unknown>)[k], segments, on);
        segments.pop();
      }
    }
  }
  return keys;
}

/**
 * One pass outside strings: the offset of the first bracket that exceeds MAX_JSON_DEPTH, and the number of
 * keys the text gives (a ":" outside a string follows a key, and only a key, in JSON text).
 */
function scanOutsideStrings(text: string): { tooDeep?: number; keys: number } {
  let depth = 0;
  let keys = 0;
  let inString = false;
  // Character codes: 34 ", 92 backslash, 123 {, 91 [, 125 }, 93 ], 58 :.
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++;
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 58) keys++;
    else if (c === 123 || c === 91) {
      if (++depth > MAX_JSON_DEPTH) return { tooDeep: i, keys };
    } else if (c === 125 || c === 93) depth--;
  }
  return { keys };
}

function describeSyntaxError(text: string, err: Error): string {
  const at = findJsonError(text);
  if (!at) return `is not valid JSON: ${err.message.slice(0, 200)}`;
  if (at.offset >= text.trimEnd().length) {
    return "is truncated: the JSON ends before its last value or bracket is complete";
  }
  return `is not valid JSON at ${lineCol(text, at.offset)}: ${at.reason}`;
}

export function lineCol(text: string, offset: number): string {
  const before = text.slice(0, offset);
  const line = before.split("\n").length;
  const col = offset - before.lastIndexOf("\n");
  return `line ${line} column ${col}`;
}
