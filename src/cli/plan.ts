// `narwhal plan`: observe, plan, print, act on nothing. No lock is taken and nothing is written
// under the state directory (no state write, no narwhal.log, no run directory, no stop or start):
// a controller may hold it right now. Only --out FILE is written. The exit code is terraform's
// -detailed-exitcode: 0 nothing to do, 2 changes pending, 1 error.
import path from "node:path";
import type { Config } from "../config.js";
import type { DesiredState } from "../desired/types.js";
import type { Logger } from "../log.js";
import { observeStandalone } from "../controller/observe-standalone.js";
import { plan as planFleet } from "../controller/planner.js";
import { desiredForPlan } from "../controller/desired-for-plan.js";
import { savedPlan, writePlanFile } from "../controller/plan-file.js";
import { readLockStatus, type LockStatus } from "../state/lock.js";
import { desiredLabel, renderPlanText } from "./plan-render.js";
import { EXIT } from "./exit-codes.js";
import { isMachineFormat, renderDocument } from "./documents.js";

export interface PlanOptions {
  format: string;
  /** Also save the plan (the object --format json prints) for `narwhal apply`. */
  out?: string;
}

/** What a plan made beside a running controller means, said once on stderr (stdout stays the plan). */
function lockNote(lock: LockStatus, stateDir: string): string | null {
  if (lock.kind === "held") {
    const h = lock.holder;
    return `narwhal: a controller holds ${stateDir} (pid ${h.pid} on ${h.host} since ${h.since}): this is what it would do next; narwhal apply needs it stopped first.`;
  }
  if (lock.kind === "not-regular")
    return `narwhal: the state lock in ${stateDir} is ${lock.what}, not a lock file: narwhal apply and reconcile will refuse until it is removed.`;
  return null;
}

/** `desired` has been validated (main.ts prints its errors as validate does, and exits 1, when it is not). */
export async function planCommand(
  config: Config,
  log: Logger,
  desired: DesiredState,
  opts: PlanOptions,
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  log.addSecrets(desired.secrets);
  // With no controller holding the state, the plan is the one a controller starting now would make
  // (adoption, orphan sweep and fresh attempts apply); beside a running one, what it would do next.
  const lock = await readLockStatus(config.stateDir);
  const observed = await observeStandalone(config, log, desired);
  const forPlan = desiredForPlan(desired);
  const plan = planFleet(forPlan, observed, { rollout: forPlan.rollout, startup: lock.kind !== "held" });
  const saved = savedPlan({
    desired: forPlan,
    observed,
    plan,
    desiredDir: config.desiredDir,
    stateDir: config.stateDir,
  });
  if (opts.out) await writePlanFile(path.resolve(opts.out), saved);
  out(
    isMachineFormat(opts.format)
      ? renderDocument(saved, opts.format)
      : renderPlanText(saved, desiredLabel(config.desiredDir, process.cwd()), desired.specs[0]?.launcher),
  );
  const note = lockNote(lock, config.stateDir);
  if (note) err(note);
  if (opts.out && !isMachineFormat(opts.format))
    err(`narwhal: plan saved to ${path.resolve(opts.out)}; run narwhal apply ${opts.out} to execute exactly it.`);
  return plan.changes ? EXIT.changes : EXIT.ok;
}
