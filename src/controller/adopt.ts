// Rebuilding an engine's place in the procedure from what is observed, for a
// controller that has no snapshot of it (state file lost or unreadable): a
// running engine this state directory started is found by its launch token,
// and its run directory's evidence says how far it got. Nothing is restarted
// that is still good; an engine from other inputs is kept as `retiring`.
import path from "node:path";
import { initialContext, type EngineContext, type Phase, type RetryPolicy } from "../../machines/engine.js";
import type { OwnedEngine } from "../backends/types.js";
import type { CacheLayout, CheckResult, Inspection, PreparedRun, ProbeResult } from "../phases/types.js";
import { INSPECTION_FILE, readPlan } from "../phases/prepare.js";
import { CHECKED_FILE } from "../phases/check.js";
import { LAYOUT_FILE } from "../phases/capture.js";
import { PROBED_FILE } from "../phases/probe.js";
import { readJsonIfExists } from "../state/atomic-file.js";

export interface Adopted {
  value: Phase;
  context: EngineContext;
}

export async function adoptFromRun(
  owned: OwnedEngine,
  engine: string,
  desiredHash: string,
  retry: RetryPolicy,
): Promise<Adopted | null> {
  if (!owned.run_dir || owned.engine !== engine) return null;
  let planRead;
  try {
    planRead = await readPlan(owned.run_dir);
  } catch {
    return null; // not a run directory narwhal can read: the orphan sweep decides
  }
  const { plan, sha256 } = planRead;
  if (plan.launch_token !== owned.launch_token || plan.engine !== engine) return null;
  const read = <T>(name: string) => readJsonIfExists<T>(path.join(owned.run_dir!, name)).catch(() => null);
  const [inspection, checked, probe, layout] = await Promise.all([
    read<Inspection>(INSPECTION_FILE),
    read<CheckResult>(CHECKED_FILE),
    read<ProbeResult>(PROBED_FILE),
    read<CacheLayout>(LAYOUT_FILE),
  ]);
  const run: PreparedRun = {
    engine,
    dir: owned.run_dir,
    input_hash: plan.input_hash,
    plan_sha256: sha256,
    launch_token: plan.launch_token,
  };
  const base: EngineContext = { ...initialContext({ engine, desiredHash, retry }), runningHash: plan.input_hash };

  const current = plan.input_hash === desiredHash && inspection !== null && checked?.plan_sha256 === sha256;
  if (!current) {
    // Serving, but from other inputs (or without its evidence): keep it until its replacement is checked.
    return { value: "pending", context: { ...base, retiring: { handle: owned.handle, run } } };
  }
  const value: Phase = layout ? "captured" : probe ? "probed" : "started";
  return { value, context: { ...base, inspection, run, checked, handle: owned.handle, probe, layout } };
}
