// What `narwhal status` reads, without the lock and without writing: the state
// file, desired/ now, the state lock's holder and, only when no controller is
// observing, the recorded engines themselves (status-observe.ts).
import type { Config } from "../config.js";
import { readState } from "../state/store.js";
import { stateWrittenAt } from "../state/state-journal.js";
import { readLockStatus } from "../state/lock.js";
import { validateDesired } from "../desired/load.js";
import { exists } from "../state/atomic-file.js";
import { summaryEngines, summaryIfCurrent } from "../state/desired-summary.js";
import { runningLauncher } from "../app.js";
import { probeEngines, type ProbeTarget } from "./status-observe.js";
import { readPlan } from "../phases/prepare.js";
import type { EngineRecord } from "../state/store.js";
import {
  servingHandle,
  statusView,
  type ControllerView,
  type DesiredNow,
  type StatusLauncher,
  type StatusView,
} from "./status-view.js";

/**
 * desired/ now, each engine's input hash as the controller would apply it. With `stateDir`, the summary
 * the controller recorded of its last valid load stands in for a validation while it still describes
 * desired/ (same texts, directory, launcher and ssh files: state/desired-summary.ts).
 */
export async function desiredNow(dir: string, stateDir?: string): Promise<DesiredNow> {
  const invalid = (issues: number, problem: string): DesiredNow => ({
    dir,
    valid: false,
    engines: null,
    issues,
    problem,
  });
  try {
    // Seven "file not found" issues would hide the one fact: there is no desired/ here.
    if (!(await exists(dir)))
      return invalid(0, `desired state ${dir} does not exist (set --desired DIR or NARWHAL_DESIRED); DESIRED shows ?`);
    const recorded = stateDir ? await summaryIfCurrent(stateDir, dir, runningLauncher().digest) : null;
    if (recorded) return { dir, valid: true, engines: recorded, issues: 0, problem: null };
    const result = await validateDesired(dir);
    if (result.state) return { dir, valid: true, engines: summaryEngines(result.state), issues: 0, problem: null };
    const n = result.issues.length;
    return invalid(
      n,
      `desired state ${dir} is invalid (${n} error${n === 1 ? "" : "s"}): run narwhal validate --desired ${dir}; DESIRED shows ?`,
    );
  } catch (err) {
    // status still shows what runs: an unreadable desired/ is reported, not fatal.
    return invalid(0, `cannot read desired state ${dir}: ${(err as Error).message}; DESIRED shows ?`);
  }
}

export async function controllerNow(stateDir: string): Promise<ControllerView> {
  const state_written_at = await stateWrittenAt(stateDir);
  const none = { holder: null, stale: false, remote: false, problem: null, state_written_at };
  try {
    const lock = await readLockStatus(stateDir);
    switch (lock.kind) {
      case "free":
        return { ...none, running: false };
      case "stale":
        return { ...none, running: false, holder: lock.holder, stale: true };
      case "held":
        return { ...none, running: true, holder: lock.holder, remote: !lock.checked };
      case "not-regular":
        return { ...none, running: null, problem: `the state lock is ${lock.what}, not a lock file` };
    }
  } catch (err) {
    return { ...none, running: null, problem: `cannot read the state lock: ${(err as Error).message}` };
  }
}

/** The launcher recorded in the engine's plan, beside this narwhal's (null: no run, or no readable plan). */
async function planLauncher(r: EngineRecord | undefined, running: string): Promise<StatusLauncher | null> {
  if (!r?.run_dir) return null;
  // A plan made before plans recorded their launcher has none: shown as such, not as an error.
  const launcher = await readPlan(r.run_dir).then(
    ({ plan }) => (plan as { launcher?: { digest: string; version: string } }).launcher,
    () => undefined,
  );
  return launcher ? { digest: launcher.digest, version: launcher.version, current: launcher.digest === running } : null;
}

/** The whole view; one engine's when `engine` is given. An unusable state file throws (StateFileError), as before. */
export async function readStatus(config: Config, engine?: string): Promise<StatusView> {
  const state = await readState(config.stateDir);
  const [desired, controller] = await Promise.all([
    desiredNow(config.desiredDir, config.stateDir),
    controllerNow(config.stateDir),
  ]);
  let live: { at: string; engines: Awaited<ReturnType<typeof probeEngines>> } | null = null;
  // A running controller observes its engines (observed_at); a second observer would only race it.
  if (controller.running !== true) {
    const targets: ProbeTarget[] = [];
    for (const r of Object.values(state.engines)) {
      const handle = servingHandle(r);
      if (handle && (!engine || r.engine === engine)) targets.push({ engine: r.engine, handle });
    }
    live = { at: new Date().toISOString(), engines: await probeEngines(config, targets) };
  }
  // One engine's details name the launcher of its plan; the table of all engines reads no plan.
  const launcher = engine ? await planLauncher(state.engines[engine], runningLauncher().digest) : null;
  return statusView(state, {
    ...(engine ? { engine } : {}),
    desired,
    controller,
    live,
    ...(engine && launcher ? { launchers: { [engine]: launcher } } : {}),
  });
}
