// prepare: write an immutable launch plan (launch.json) and the engine's
// private environment (engine.env for a native engine, container.env for a
// container: run-env.ts; 0600) into a fresh run directory.
// Ensure semantics: a run this engine already prepared for the same inputs is
// reused, so a re-run after a crash does not fork a second plan.
import fs from "node:fs/promises";
import path from "node:path";
import { createHash, randomBytes } from "node:crypto";
import type { EngineSpec } from "../desired/types.js";
import type { Inspection, PreparedRun } from "./types.js";
import { buildLaunchPlan, renderEnvFile, type AppIdentity, type LaunchPlan } from "./plan.js";
import { createDirAtomically, createRunDir, removePartialRuns, type RunFile } from "../state/run-dir.js";
import { exists, readOwnFile } from "../state/atomic-file.js";
import { PhaseError } from "../errors.js";
import { MODEL_MANIFEST_FILE } from "./host/model-manifest.js";
import { envFileFor } from "./run-env.js";
import { seedRecordFiles } from "./seed-records.js";

export const LAUNCH_FILE = "launch.json";
export const API_KEY_FILE = "api-key";
export const INSPECTION_FILE = "inspection.json";

export function sha256(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

export async function readPlan(runDir: string): Promise<{ plan: LaunchPlan; sha256: string }> {
  const bytes = readOwnFile(path.join(runDir, LAUNCH_FILE));
  return { plan: JSON.parse(bytes.toString("utf8")) as LaunchPlan, sha256: sha256(bytes) };
}

/** The run still holds the plan it was prepared with, for the same inputs. */
async function reusable(run: PreparedRun, spec: EngineSpec): Promise<boolean> {
  if (run.engine !== spec.name || run.input_hash !== spec.input_hash) return false;
  try {
    return (await readPlan(run.dir)).sha256 === run.plan_sha256;
  } catch {
    return false;
  }
}

export interface PrepareOptions {
  stateDir: string;
  app: AppIdentity;
  /** The run this engine prepared last, if any (from the machine's context). */
  existing?: PreparedRun | null;
  now?: Date;
  /**
   * Create exactly this directory instead of one under the state directory
   * (`narwhal engine prepare --out DIR`). It must not exist: preparation requires a fresh --out.
   */
  out?: string;
}

function refuseOut(engine: string, out: string): PhaseError {
  return new PhaseError(engine, "prepare", `--out ${out} already exists`, {
    retryable: false,
    input: "--out",
    fix: "Preparation requires a fresh --out: name a directory that does not exist yet. Each run directory is immutable.",
  });
}

/**
 * seed 000 `test "$(sha256sum "$NARWHAL_ENGINE_LAUNCHER")" = "$NARWHAL_ENGINE_LAUNCHER_SHA256"` before prepare:
 * an operator who pinned the launcher they reviewed gets no plan from another (an upgrade not yet reviewed).
 */
export function launcherPinRefusal(spec: EngineSpec): PhaseError | null {
  // spec.launcher is the one launch.json would record (this narwhal's: src/app.ts runningLauncher).
  const pin = spec.launcher_pin;
  const digest = spec.launcher.digest;
  if (pin === undefined || pin === digest) return null;
  return new PhaseError(
    spec.name,
    "prepare",
    `this narwhal's launcher digest is ${digest} (narwhal ${spec.launcher.version}), but NARWHAL_ENGINE_LAUNCHER_SHA256 pins ${pin}`,
    {
      retryable: false,
      input: "NARWHAL_ENGINE_LAUNCHER_SHA256",
      fix: `Set NARWHAL_ENGINE_LAUNCHER_SHA256=${digest} after reviewing the upgrade, or unset it.`,
    },
  );
}

export async function prepare(spec: EngineSpec, inspection: Inspection, opts: PrepareOptions): Promise<PreparedRun> {
  const pinned = launcherPinRefusal(spec);
  if (pinned) throw pinned;
  if (opts.out && (await exists(opts.out))) throw refuseOut(spec.name, opts.out);
  if (!opts.out && opts.existing && (await reusable(opts.existing, spec))) return opts.existing;
  if (inspection.engine !== spec.name) {
    throw new PhaseError(spec.name, "prepare", `inspection belongs to ${inspection.engine}`, { retryable: false });
  }
  if (!opts.out) await removePartialRuns(opts.stateDir, spec.name);
  const now = opts.now ?? new Date();
  const launchToken = randomBytes(16).toString("hex");
  // The checkpoint's metadata and a GGUF file's digest (NARWHAL_MODEL_PATH: config.json alone does not pin it)
  // were read on the engine's node by inspect: the plan is built from what that node holds.
  const { plan, env } = buildLaunchPlan({
    spec,
    inspection,
    meta: inspection.model_meta,
    app: opts.app,
    launchToken,
    createdAt: now.toISOString(),
    modelFileSha256: inspection.model_file_sha256,
  });
  const planBytes = JSON.stringify(plan, null, 2) + "\n";
  const files: RunFile[] = [
    { name: LAUNCH_FILE, data: planBytes, mode: 0o400 },
    { name: envFileFor(spec.backend), data: renderEnvFile(env), mode: 0o600 },
    // What inspection saw, whole: evidence, and what a controller that lost its state file adopts from.
    { name: INSPECTION_FILE, data: JSON.stringify(inspection, null, 2) + "\n", mode: 0o600 },
    // seed 000's complete manifest, on its own: what tree_sha256 in launch.json stands for, file by file.
    { name: MODEL_MANIFEST_FILE, data: JSON.stringify(inspection.model_manifest, null, 2) + "\n", mode: 0o600 },
    // The launch record in the seed's shape and the runtime observation it names (seed 000's snippets read them).
    ...seedRecordFiles(spec, inspection),
    // Containers read the key from a file copied in at start, never from Config.Env.
    ...(spec.backend === "container" && spec.api_key
      ? [{ name: API_KEY_FILE, data: spec.api_key.reveal() + "\n", mode: 0o600 }]
      : []),
  ];
  let dir: string;
  if (opts.out) {
    dir = path.resolve(opts.out);
    await fs.mkdir(path.dirname(dir), { recursive: true, mode: 0o700 });
    if (await exists(dir)) throw refuseOut(spec.name, opts.out);
    await createDirAtomically(dir, files);
  } else {
    dir = await createRunDir(opts.stateDir, spec.name, spec.input_hash, files, now);
  }
  return {
    engine: spec.name,
    dir,
    input_hash: spec.input_hash,
    plan_sha256: sha256(planBytes),
    launch_token: launchToken,
  };
}
