// The launcher digest (seed 000: "A changed launcher requires a new prepared run so deployed
// snapshot and digest match the management checkout"). What narwhal ships to a node and how it
// writes a plan decide what a prepared run means, so a run made by another launcher is not this
// launcher's run: the digest is in every launch.json, in every input hash (a new launcher replaces
// every engine through a fresh prepared run), and the check refuses a plan whose digest differs.
// The git revision is recorded beside it but is not part of it: a commit that changes none of
// these parts changes nothing an engine runs.
import fs from "node:fs";
import path from "node:path";
import { canonicalJson, sha256Hex } from "./desired/hash.js";

/**
 * Every script narwhal runs on a node, as a path under the package root. The list is the one
 * place a shipped script is named for the digest: adding a script is one line here.
 */
export const SHIPPED_SCRIPTS: readonly string[] = [
  "src/phases/check_runtime.py",
  "src/phases/inspect_runtime.py",
  "src/phases/host/model_manifest.py",
  "src/phases/attestation_serve.py",
];

/**
 * The shape of the launch.json that buildLaunchPlan (src/phases/plan.ts) writes. Bump it whenever
 * that output gains, loses or changes the meaning of a field: the digest, and so every input hash,
 * changes with it. 1 was every plan before plans recorded their launcher; 2 added `launcher`.
 * (PLAN_SCHEMA says what readers accept; this says what wrote the plan.)
 */
export const PLAN_FORMAT = 2;

/** sha256 recorded for a shipped script that is absent: the check reports the missing file when it runs. */
export const MISSING_SCRIPT = "missing";

/** The launcher digest and the parts it is computed from, as launch.json records them. */
export interface LauncherIdentity {
  /** sha256 of the canonical JSON of the other three fields. */
  digest: string;
  /** narwhal's version (package.json). */
  version: string;
  plan_format: number;
  /** sha256 of each shipped script, by its file name. */
  scripts: Record<string, string>;
}

export type LauncherParts = Omit<LauncherIdentity, "digest">;

/** The digest over its parts (pure). */
export function launcherDigest(parts: LauncherParts): string {
  return sha256Hex(canonicalJson({ version: parts.version, plan_format: parts.plan_format, scripts: parts.scripts }));
}

export function launcherIdentity(parts: LauncherParts): LauncherIdentity {
  // Only the parts, never a digest the argument may carry (a spread identity): the digest is computed.
  return {
    digest: launcherDigest(parts),
    version: parts.version,
    plan_format: parts.plan_format,
    scripts: parts.scripts,
  };
}

/** The identity of the launcher whose scripts lie under `root` (the package root, or a copy of its scripts). */
export function readLauncher(
  root: string,
  version: string,
  scripts: readonly string[] = SHIPPED_SCRIPTS,
  planFormat = PLAN_FORMAT,
): LauncherIdentity {
  const sums: Record<string, string> = {};
  for (const rel of scripts) {
    let sum = MISSING_SCRIPT;
    try {
      sum = sha256Hex(fs.readFileSync(path.join(root, rel)));
    } catch {
      /* an absent script is a digest of its own; the check names the missing file when it runs */
    }
    sums[path.basename(rel)] = sum;
  }
  return launcherIdentity({ version, plan_format: planFormat, scripts: sums });
}

/** The parts in which the launcher `was` differs from `now`, in words ("version 0.1.0 → 0.2.0"); empty when equal. */
export function launcherChanges(was: LauncherParts | undefined, now: LauncherParts): string[] {
  if (!was) return ["no launcher recorded (a plan made before plans recorded their launcher)"];
  const out: string[] = [];
  if (was.version !== now.version) out.push(`version ${was.version} → ${now.version}`);
  if (was.plan_format !== now.plan_format) out.push(`plan format ${was.plan_format} → ${now.plan_format}`);
  const names = [...new Set([...Object.keys(was.scripts), ...Object.keys(now.scripts)])].sort();
  for (const n of names) {
    const a = was.scripts[n] ?? "absent";
    const b = now.scripts[n] ?? "absent";
    if (a !== b) out.push(`${n} sha256 ${a.slice(0, 12)} → ${b.slice(0, 12)}`);
  }
  return out;
}
