// A launch directory as the operator actions see it: the prepared plan, the
// check that binds it, what was started from it, and which output files it
// already holds. A run directory is immutable, so every action refuses to
// write a file that exists and says to use a fresh prepared directory.
import fs from "node:fs/promises";
import path from "node:path";
import type { CheckResult, EngineHandle, PreparedRun } from "./types.js";
import { PLAN_SCHEMA, type LaunchPlan } from "./plan.js";
import { LAUNCH_FILE, readPlan } from "./prepare.js";
import { CHANGED_PLAN_FIX, CHECKED_FILE, planBindingProblem } from "./plan-binding.js";
import { CONTAINER_ID_FILE } from "../backends/container.js";
import { PROCESS_FILE } from "../backends/native.js";
import { exists, readJsonIfExists } from "../state/atomic-file.js";
import { refusal } from "./action-error.js";

export const FRESH_RUN_FIX =
  "A run directory is immutable: use a fresh prepared directory (narwhal engine prepare --out NEW_DIR, then check).";

export interface LoadedRun {
  run: PreparedRun;
  plan: LaunchPlan;
}

export interface CheckedRun extends LoadedRun {
  checked: CheckResult;
}

/** The prepared run in `dir` (launch.json read and hashed). */
export async function loadRun(action: string, dir: string): Promise<LoadedRun> {
  const abs = path.resolve(dir);
  if (!(await exists(path.join(abs, LAUNCH_FILE)))) {
    throw refusal(action, `${abs} holds no ${LAUNCH_FILE}`, {
      run: abs,
      input: "--run",
      fix: "Select an existing launch directory written by `narwhal engine prepare --out DIR`.",
    });
  }
  let loaded;
  try {
    loaded = await readPlan(abs);
  } catch (err) {
    throw refusal(action, `${LAUNCH_FILE} in ${abs} is unreadable: ${(err as Error).message}`, {
      run: abs,
      input: LAUNCH_FILE,
      fix: "Prepare a fresh run directory.",
    });
  }
  const { plan, sha256 } = loaded;
  if (plan.schema !== PLAN_SCHEMA) {
    throw refusal(action, `${LAUNCH_FILE} in ${abs} is a ${String(plan.schema)} plan, not ${PLAN_SCHEMA}`, {
      run: abs,
      input: LAUNCH_FILE,
      fix: "Prepare a fresh run directory with this narwhal.",
    });
  }
  return {
    plan,
    run: {
      engine: plan.engine,
      dir: abs,
      input_hash: plan.input_hash,
      plan_sha256: sha256,
      launch_token: plan.launch_token,
    },
  };
}

/** The run plus a checked.json that binds its current plan hash. */
export async function loadCheckedRun(action: string, dir: string): Promise<CheckedRun> {
  const loaded = await loadRun(action, dir);
  const { run, plan } = loaded;
  const checked = await readJsonIfExists<CheckResult>(path.join(run.dir, CHECKED_FILE));
  if (!checked) {
    throw refusal(action, `${run.dir} has no ${CHECKED_FILE}: the plan was never checked`, {
      engine: plan.engine,
      run: run.dir,
      input: CHECKED_FILE,
      fix: `Run \`narwhal engine check --run ${run.dir}\` first.`,
    });
  }
  const changed = planBindingProblem(path.join(run.dir, LAUNCH_FILE), run.plan_sha256, [
    { what: path.join(run.dir, CHECKED_FILE), sha256: checked.plan_sha256 },
  ]);
  if (changed) {
    throw refusal(action, changed, {
      engine: plan.engine,
      run: run.dir,
      input: LAUNCH_FILE,
      fix: CHANGED_PLAN_FIX,
    });
  }
  return { ...loaded, checked };
}

/** Refuse when any of `files` already exists in the run directory. */
export async function refuseExisting(action: string, loaded: LoadedRun, files: string[]): Promise<void> {
  for (const f of files) {
    if (await exists(path.join(loaded.run.dir, f))) {
      throw refusal(action, `${f} already exists in ${loaded.run.dir}`, {
        engine: loaded.plan.engine,
        run: loaded.run.dir,
        input: f,
        fix: FRESH_RUN_FIX,
      });
    }
  }
}

/** The file that records what was started from a run (container.id or native-process.json). */
export function startedFile(plan: Pick<LaunchPlan, "backend">): string {
  return plan.backend === "container" ? CONTAINER_ID_FILE : PROCESS_FILE;
}

/** An engine was started from this run directory (its identity file exists). */
export function wasStarted(runDir: string, plan: Pick<LaunchPlan, "backend">): Promise<boolean> {
  return exists(path.join(runDir, startedFile(plan)));
}

/** A plan is unused while nothing was ever started from it; a fresh start needs a fresh directory. */
export async function refuseUsed(action: string, loaded: LoadedRun): Promise<void> {
  const file = startedFile(loaded.plan);
  if (await wasStarted(loaded.run.dir, loaded.plan)) {
    throw refusal(action, `an engine was already started from ${loaded.run.dir} (${file} exists)`, {
      engine: loaded.plan.engine,
      run: loaded.run.dir,
      input: file,
      fix: "A fresh start needs a fresh directory: prepare and check a new one.",
    });
  }
}

/** The engine started from this run, as recorded in its directory; null when nothing was started. */
export async function recordedHandle(run: PreparedRun, plan: LaunchPlan): Promise<EngineHandle | null> {
  if (plan.backend === "native") return readJsonIfExists<EngineHandle>(path.join(run.dir, PROCESS_FILE));
  const id = (await fs.readFile(path.join(run.dir, CONTAINER_ID_FILE), "utf8").catch(() => "")).trim();
  if (!id) return null;
  return {
    kind: "container",
    container_id: id,
    launch_token: run.launch_token,
    ...(plan.docker_host ? { docker_host: plan.docker_host } : {}),
  };
}

/** The recorded engine, or a refusal that says to start one first. */
export async function requireHandle(action: string, loaded: LoadedRun): Promise<EngineHandle> {
  const handle = await recordedHandle(loaded.run, loaded.plan);
  if (!handle) {
    throw refusal(action, `nothing was started from ${loaded.run.dir} (no ${startedFile(loaded.plan)})`, {
      engine: loaded.plan.engine,
      run: loaded.run.dir,
      input: startedFile(loaded.plan),
      fix: `Start the engine first: narwhal engine start --run ${loaded.run.dir}.`,
    });
  }
  return handle;
}
