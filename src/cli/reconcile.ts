// `narwhal reconcile [--once]`: converge and exit (CI), or keep converging on
// every desired change and on drift until SIGINT/SIGTERM (engines keep running).
import { loadDesired } from "../desired/load.js";
import { DesiredStateError } from "../errors.js";
import { readState } from "../state/store.js";
import { watchDesired } from "../controller/watch.js";
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

export async function reconcileOnce(config: Config, log: Logger, format: string, write: (s: string) => void): Promise<number> {
  // Validate before taking the lock: an invalid desired state starts or stops nothing.
  const desired = await loadDesired(config.desiredDir);
  const controller = controllerFor(config, log, "once");
  await controller.open();
  const shutdown = onShutdown();
  try {
    await controller.apply(desired);
    await controller.waitSettled(shutdown.signal);
  } finally {
    shutdown.dispose();
    await controller.close();
  }
  const state = await readState(config.stateDir);
  const view = statusView(state);
  write(format === "json" ? JSON.stringify(view, null, 2) : renderStatusText(view, false));
  const converged = desired.specs.every((s) => state.engines[s.name]?.phase === "captured");
  return converged ? EXIT.ok : EXIT.notConverged;
}

export async function reconcileWatch(config: Config, log: Logger): Promise<number> {
  const controller = controllerFor(config, log);
  await controller.open();
  const shutdown = onShutdown();
  // One reload or resync at a time: they share the controller's actors.
  let queue: Promise<void> = Promise.resolve();
  const enqueue = (work: () => Promise<void>) => {
    queue = queue.then(work).catch((err) => log.error(`reconcile step failed: ${(err as Error).message}`));
  };
  const reload = async () => {
    try {
      const desired = await loadDesired(config.desiredDir);
      await controller.apply(desired);
      log.info(`desired state applied (${desired.specs.length} engines)`);
    } catch (err) {
      if (!(err instanceof DesiredStateError)) throw err;
      // Keep converging on the last valid desired state; touch nothing.
      log.error(err.describe());
    }
  };
  enqueue(reload);
  const watcher = watchDesired(config.desiredDir, config.watch.debounceMs, () => enqueue(reload));
  const timer = setInterval(() => enqueue(() => controller.resync()), config.watch.resyncMs);
  try {
    await new Promise<void>((resolve) => shutdown.signal.addEventListener("abort", () => resolve(), { once: true }));
  } finally {
    clearInterval(timer);
    shutdown.dispose();
    await watcher.close();
    await queue;
    await controller.close();
    log.info("controller stopped; engines keep running");
  }
  return EXIT.ok;
}
