// The seal of narwhal.json and of each narwhal.journal line: the sha256 of the JSON as the store wrote
// it, keyed by the state version and the revision of its schema, as its last field (`,"seal":"<hex>"}`
// and a newline). Every record a store writes was checked when it was read, or made by the controller
// in the shape the schema describes; a reader that finds the file's bytes under an intact seal may take them without checking
// each record again. That check was the largest part of a `status` of 1000 converged engines (zod over
// 9.5 MB of records: about 0.2 s of CPU and the garbage of its copies, every CLI process cold); hashing
// the bytes costs about 6 ms. A file edited by hand, cut short, or written by another narwhal (another
// schema revision) does not match, and is checked record by record as before.
import crypto from "node:crypto";

/**
 * The schema's revision: bump it whenever StateFileSchema changes, so a seal made under the old schema
 * no longer vouches for a file (test/state/state-seal.test.ts holds it to the schema's digest).
 */
export const SEAL_REVISION = 2;

const OPEN = ',"seal":"';
const CLOSE = '"}\n';
const HEX = 64;
const TAIL_BYTES = OPEN.length + HEX + CLOSE.length;

/** The seal of the object whose JSON is `body` and a closing brace (the seal field goes between them). */
function digest(version: number, body: Buffer | string): string {
  return crypto
    .createHash("sha256")
    .update(`narwhal state ${version} schema ${SEAL_REVISION}\n`)
    .update(body)
    .update("}")
    .digest("hex");
}

/** `json` (one object, as JSON.stringify wrote it) with its seal as the last field, and a newline. */
export function sealJson(json: string, version: number): string {
  if (!json.endsWith("}")) throw new Error("sealJson: not a JSON object");
  const body = json.slice(0, -1);
  return `${body}${OPEN}${digest(version, body)}${CLOSE}`;
}

/** Whether `bytes` end in a seal of exactly what precedes it, made for `version` under this schema revision. */
export function hasIntactSeal(bytes: Buffer, version: number): boolean {
  if (bytes.length <= TAIL_BYTES) return false;
  const tail = bytes.subarray(bytes.length - TAIL_BYTES).toString("latin1");
  if (!tail.startsWith(OPEN) || !tail.endsWith(CLOSE)) return false;
  const seal = tail.slice(OPEN.length, OPEN.length + HEX);
  return /^[0-9a-f]{64}$/.test(seal) && seal === digest(version, bytes.subarray(0, bytes.length - TAIL_BYTES));
}
