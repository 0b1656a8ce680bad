// `narwhal apply FILE`: execute exactly a saved plan, or refuse. Under the state lock the world is
// observed and planned again (acting on nothing); any difference from what the plan was computed
// from — desired inputs, rollout policy, what runs, the plan that comes out — refuses it (exit 1,
// one line per difference) before anything starts or stops. Otherwise it converges as
// `reconcile --once` does: exit 0 converged, 2 not.
import path from "node:path";
import { loadDesiredExplained } from "./image-tags.js";
import { StalePlanError } from "../errors.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { readPlanFile, type SavedPlan } from "../controller/plan-file.js";
import { staleness } from "../controller/plan-file-staleness.js";
import { desiredForPlan } from "../controller/desired-for-plan.js";
import { controllerFor } from "./runtime.js";
import { convergeOnce } from "./reconcile.js";
import type { Observed, Plan } from "../controller/plan-types.js";

/** The plan file first: its directories are the defaults for --desired and --state. */
export async function readPlanForApply(file: string): Promise<{ file: string; saved: SavedPlan }> {
  const abs = path.resolve(file);
  return { file: abs, saved: await readPlanFile(abs) };
}

export async function applyCommand(
  config: Config,
  log: Logger,
  file: string,
  saved: SavedPlan,
  format: string,
  write: (s: string) => void,
): Promise<number> {
  // A plan is about one state directory's engines: another one's are not what it was computed against.
  if (config.stateDir !== saved.state_dir) {
    throw new StalePlanError(file, [
      `the plan was made for state directory ${saved.state_dir}, not ${config.stateDir}`,
    ]);
  }
  // Validate before taking the lock: an invalid desired state starts or stops nothing.
  const desired = await loadDesiredExplained(config);
  const controller = controllerFor(config, log, "once");
  await controller.open();
  let differences: string[];
  try {
    const now = await controller.preview(desired);
    differences = staleness(saved, desiredForPlan(desired), now.observed, now.plan);
  } catch (err) {
    await controller.close();
    throw err;
  }
  if (differences.length > 0) {
    await controller.close();
    throw new StalePlanError(file, differences);
  }
  log.info(`saved plan ${file} still matches desired and observed state: applying it`);
  // The plan the controller executes is checked once more as it is computed: a change in between refuses it too.
  const check = (observed: Observed, plan: Plan) => staleness(saved, desiredForPlan(desired), observed, plan);
  return (await convergeOnce(controller, config, desired, format, write, { file, check })).code;
}
