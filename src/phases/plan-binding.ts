// The rule every step after check relies on: launch.json is, byte for byte,
// the plan that was checked (checked.json's plan_sha256) and the plan the
// state recorded when it was prepared. A run directory is immutable, so any
// difference means the file was edited after the fact; acting on it would run
// a command nothing ever checked. Start, probe and capture verify it first.
import fs from "node:fs/promises";
import path from "node:path";
import type { CheckResult, PreparedRun } from "./types.js";
import type { LaunchPlan } from "./plan.js";
import { LAUNCH_FILE, sha256 } from "./prepare.js";
import { readJsonIfExists } from "../state/atomic-file.js";
import { PhaseError, type Step } from "../errors.js";

export const CHECKED_FILE = "checked.json";
export const CHANGED_PLAN_FIX =
  "A changed launch-plan hash requires a fresh prepared run: restore launch.json, or prepare a new directory and check it (the reconciler does so on its next run). Nothing was started from the changed plan.";

/** How a message names the hash the state file recorded for the run when it was prepared. */
export const STATE_BINDING = "the state file's record of the prepared run";

/** A hash some record binds the plan to: checked.json's, or the state's (recorded at prepare). */
export interface PlanBinding {
  what: string;
  sha256: string;
}

/** Why `file` (hashing to `actual`) is not the plan every binding names; null when all agree. */
export function planBindingProblem(file: string, actual: string, bindings: PlanBinding[]): string | null {
  const differing = bindings.filter((b) => b.sha256 !== actual);
  if (differing.length === 0) return null;
  return `${file} hashes to ${actual}, but ${differing.map((b) => `${b.what} binds ${b.sha256}`).join(" and ")}`;
}

export interface VerifiedPlan {
  plan: LaunchPlan;
  planSha: string;
  checked: CheckResult;
}

/**
 * The run's plan, verified before anything acts on it: sha256(launch.json) must equal
 * checked.json's plan_sha256 and the hash the state recorded (`run.plan_sha256`). The
 * hash is taken before parsing, so an edit that also breaks the JSON is named the same way.
 * A mismatch is terminal: retrying cannot make an edited plan the checked one.
 */
export async function readVerifiedPlan(run: PreparedRun, step: Step): Promise<VerifiedPlan> {
  const file = path.join(run.dir, LAUNCH_FILE);
  const fail = (message: string, input: string, fix: string) =>
    new PhaseError(run.engine, step, message, { retryable: false, input, fix });
  const bytes = await fs.readFile(file);
  const planSha = sha256(bytes);
  const checked = await readJsonIfExists<CheckResult>(path.join(run.dir, CHECKED_FILE));
  if (!checked)
    throw fail(
      `${run.dir} has no ${CHECKED_FILE}: the plan was never checked`,
      CHECKED_FILE,
      "Repeat the image check for this plan.",
    );
  const problem = planBindingProblem(file, planSha, [
    { what: path.join(run.dir, CHECKED_FILE), sha256: checked.plan_sha256 },
    { what: STATE_BINDING, sha256: run.plan_sha256 },
  ]);
  if (problem) throw fail(problem, file, CHANGED_PLAN_FIX);
  return { plan: JSON.parse(bytes.toString("utf8")) as LaunchPlan, planSha, checked };
}
