// `narwhal reconcile [--once]`: converge and exit (CI), or keep converging on
// every desired change and on drift until SIGINT/SIGTERM (engines keep running).
import { loadDesired } from "../desired/load.js";
import { DesiredStateError, StalePlanError } from "../errors.js";
import { readState } from "../state/store.js";
import { watchDesired } from "../controller/watch.js";
import type { Controller, PlanGuard } from "../controller/controller.js";
import type { DesiredState } from "../desired/types.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { controllerFor } from "./runtime.js";
import { EXIT } from "./exit-codes.js";
import { renderStatusText, statusView } from "./status-view.js";

function onShutdown(): { signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return { signal: ac.signal, dispose: () => (process.off("SIGINT", stop), process.off("SIGTERM", stop)) };
}

/**
 * Converge an open controller on `desired`, print the status, and say whether every desired engine
 * is captured (exit 0) or not (2). Shared by `reconcile --once` and `apply` of a saved plan.
 */
export async function convergeOnce(
  controller: Controller,
  config: Config,
  desired: DesiredState,
  format: string,
  write: (s: string) => void,
  guard?: { file: string; check: PlanGuard },
): Promise<number> {
  const shutdown = onShutdown();
  try {
    controller.apply(desired, guard?.check);
    await controller.waitSettled(shutdown.signal);
  } finally {
    shutdown.dispose();
    await controller.close();
  }
  // The world moved between the check under the lock and the first plan: nothing was executed.
  if (guard && controller.refused) throw new StalePlanError(guard.file, controller.refused);
  const state = await readState(config.stateDir);
  const view = statusView(state);
  write(format === "json" ? JSON.stringify(view, null, 2) : renderStatusText(view, false));
  const converged = desired.specs.every((s) => state.engines[s.name]?.phase === "captured");
  return converged ? EXIT.ok : EXIT.notConverged;
}

export async function reconcileOnce(
  config: Config,
  log: Logger,
  format: string,
  write: (s: string) => void,
): Promise<number> {
  // Validate before taking the lock: an invalid desired state starts or stops nothing.
  const desired = await loadDesired(config.desiredDir);
  const controller = controllerFor(config, log, "once");
  await controller.open();
  return convergeOnce(controller, config, desired, format, write);
}

export async function reconcileWatch(config: Config, log: Logger): Promise<number> {
  const controller = controllerFor(config, log);
  await controller.open();
  const shutdown = onShutdown();
  // Reloads are read one after another so an older read never overrides a newer one; each only
  // hands the controller a desired state (its queue coalesces the work), so they cannot pile up.
  let reloads: Promise<void> = Promise.resolve();
  const reload = () => {
    reloads = reloads.then(async () => {
      try {
        const desired = await loadDesired(config.desiredDir);
        controller.apply(desired);
        log.info(`desired state applied (${desired.specs.length} engines)`);
      } catch (err) {
        // Keep converging on the last valid desired state; touch nothing.
        log.error(
          err instanceof DesiredStateError
            ? err.describe()
            : `cannot load the desired state: ${(err as Error).message}`,
        );
      }
    });
  };
  reload();
  const watcher = watchDesired(config.desiredDir, config.watch.debounceMs, reload);
  const timer = setInterval(() => controller.resync(), config.watch.resyncMs);
  try {
    await new Promise<void>((resolve) => shutdown.signal.addEventListener("abort", () => resolve(), { once: true }));
  } finally {
    clearInterval(timer);
    shutdown.dispose();
    await watcher.close();
    await reloads;
    await controller.close();
    log.info("controller stopped; engines keep running");
  }
  return EXIT.ok;
}
