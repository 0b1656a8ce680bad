// The identity of what one validation of desired/ reads: the three files'
// texts as validateDesired reads them, the directory relative paths resolve
// against, and the launcher whose identity every engine's input hash carries.
// Validation reads nothing else except the ssh files the nodes name
// (node-files.ts), which a summary records and compares apart: two equal keys
// with equal node-file facts validate alike, so `narwhal status` may use what
// the controller recorded of the last valid desired state
// (state/desired-summary.ts) instead of validating 1000 engines again.
import { join, resolve } from "node:path";
import { INPUT_HASH_VERSION, sha256Hex } from "./hash.js";
import { readTextFile } from "./json-safe.js";
import { ENV_FILE, FLEET_FILE, LAUNCH_FILE } from "./rules.js";
import { perEngineCap } from "./size-caps.js";

/** Bumped when what the key covers, or what a summary holds, changes meaning (2: the input hash version). */
const KEY_VERSION = 2;

/** The key of one reading of desired/: the texts of deployment.env, fleet.json and engine-launch.json, in that order. */
export function desiredKey(absDir: string, texts: readonly [string, string, string], launcherDigest: string): string {
  // Lengths first: no two different triples of texts hash the same material.
  // The input hash version too: a reconcile takes a summary's input hashes (load.ts RecordedValidation), which
  // must be of the hashing that would compute them now, even in a build whose version string did not change.
  const material = [
    KEY_VERSION,
    INPUT_HASH_VERSION,
    absDir,
    launcherDigest,
    ...texts.map((t) => t.length),
    ...texts,
  ].join("\n");
  return sha256Hex(material);
}

/**
 * The key of desired/ as it is now, read as validation reads it (symlinks, regular files, UTF-8, NUL), each
 * file under the ceiling of any fleet; null when a file cannot be read so (validation would report it).
 */
export async function readDesiredKey(dir: string, launcherDigest: string): Promise<string | null> {
  const absDir = resolve(dir);
  const ceiling = perEngineCap(undefined);
  const reads = await Promise.all(
    [ENV_FILE, FLEET_FILE, LAUNCH_FILE].map((f) => readTextFile(join(absDir, f), f, absDir, ceiling)),
  );
  const texts = reads.map((r) => r.text);
  if (texts.some((t) => t === undefined)) return null;
  return desiredKey(absDir, texts as [string, string, string], launcherDigest);
}
