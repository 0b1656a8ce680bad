// `narwhal reconcile [--once]`: converge and exit (CI), or keep converging on
// every desired change and on drift until SIGINT/SIGTERM (engines keep running).
import { loadDesiredExplained } from "./image-tags.js";
import { DesiredStateError, StalePlanError } from "../errors.js";
import { readState, type StateFile } from "../state/store.js";
import { KV_CONDITION } from "../controller/kv-condition.js";
import { isPairedRole, PAIRED_ROLES } from "../controller/serving-fleet.js";
import { watchPruner } from "./prune.js";
import type { Controller, PlanGuard } from "../controller/controller.js";
import { fanOut, type ObserverSubscriber } from "../controller/observer.js";
import type { LiveView } from "./progress-tty.js";
import { convergedSummary } from "./progress-view.js";
import type { DesiredState } from "../desired/types.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { controllerFor } from "./runtime.js";
import { EXIT } from "./exit-codes.js";
import { document, isMachineFormat, renderDocument } from "./documents.js";
import { renderStatusText, statusView } from "./status-view.js";
import { unobservable } from "../controller/node-faults.js";
import { nodeWords } from "../controller/rollout.js";
import type { Observed } from "../controller/plan-types.js";

function onShutdown(): { signal: AbortSignal; dispose(): void } {
  const ac = new AbortController();
  const stop = () => ac.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return { signal: ac.signal, dispose: () => (process.off("SIGINT", stop), process.off("SIGTERM", stop)) };
}

/**
 * Prefill and decode engines whose KVTransfer is not True: every P/D pair must be proven. An engine
 * with no peer is exempt only when desired/ has no engine of the other role (nothing to pair).
 */
function unprovenPairs(
  state: StateFile,
  desired: DesiredState,
): Array<{ engine: string; reason: string; message: string }> {
  const roles = new Set(desired.specs.map((s) => s.role));
  return desired.specs
    .filter((s) => isPairedRole(s.role))
    .flatMap((s) => {
      const kv = state.engines[s.name]?.conditions.find((c) => c.type === KV_CONDITION);
      if (kv?.status === "True") return [];
      if (kv?.reason === "NoPeer" && !PAIRED_ROLES.every((r) => roles.has(r))) return [];
      return [{ engine: s.name, reason: kv?.reason ?? "NotProven", message: kv?.message ?? "no proof recorded" }];
    });
}

/**
 * Converge an open controller on `desired`, print the status, and say whether every desired engine
 * is captured (exit 0) or not (2), with the state it judged by (read once: a large fleet's file is not
 * cheap to read again). Shared by `reconcile --once` and `apply` of a saved plan.
 */
export async function convergeOnce(
  controller: Controller,
  config: Config,
  desired: DesiredState,
  format: string,
  write: (s: string) => void,
  guard?: { file: string; check: PlanGuard },
): Promise<{ code: number; state: StateFile }> {
  const shutdown = onShutdown();
  const unseen = outwaitNodes(controller, config, desired);
  try {
    controller.apply(desired, guard?.check);
    const signal = AbortSignal.any([shutdown.signal, unseen.signal]);
    // Settled with an engine whose node does not answer is not done: it is re-observed until it answers or the bound passes.
    do await controller.waitSettled(signal);
    while (!signal.aborted && nodeBlocked(controller.observed, desired).length > 0 && (await unseen.tick()));
  } finally {
    unseen.dispose();
    shutdown.dispose();
    await controller.close();
  }
  // The world moved between the check under the lock and the first plan: nothing was executed.
  if (guard && controller.refused) throw new StalePlanError(guard.file, controller.refused);
  const state = await readState(config.stateDir);
  const view = statusView(state);
  const blocked = nodeBlocked(controller.observed, desired);
  const gaveUp = blocked.length
    ? `\nnot converged: ${blocked.map((b) => `${b.engine}: ${b.why}`).join("; ")}, after outwaiting it for ${Math.round(config.retry.onceOutwaitMs / 1000)} s (NARWHAL_ONCE_OUTWAIT_MS); the other engines were reconciled`
    : "";
  const unproven = desired.kv.prove ? unprovenPairs(state, desired) : [];
  const kvWords = unproven.length
    ? `\nnot converged: KV transfer not proven for ${unproven.map((u) => `${u.engine} (${u.reason}: ${u.message})`).join("; ")}`
    : "";
  // An engine whose node does not answer is not converged, whatever its record last said.
  const converged =
    blocked.length === 0 &&
    unproven.length === 0 &&
    desired.specs.every((s) => {
      const e = state.engines[s.name];
      return e?.phase === "captured" && !e.conditions.some((c) => c.type === "NodeReachable" && c.status === "False");
    });
  write(
    isMachineFormat(format)
      ? renderDocument(document(guard ? "ApplyResult" : "ReconcileResult", { converged, ...view }), format)
      : renderStatusText(view, false) + gaveUp + kvWords,
  );
  return { code: converged ? EXIT.ok : EXIT.notConverged, state };
}

/**
 * Engines their node keeps from converging in the last observation: recorded ones that cannot be
 * observed there, and desired ones not created because what runs there cannot be listed.
 */
function nodeBlocked(observed: Observed | null, desired: DesiredState): Array<{ engine: string; why: string }> {
  const unseen = unobservable(observed).filter((u) => observed?.engines[u.engine]?.node_fault);
  const unlisted = desired.specs.flatMap((s) => {
    const fault = observed?.unlisted?.find((f) => f.node === s.node.name);
    return fault && !observed?.engines[s.name]
      ? [{ engine: s.name, why: `not created: what runs there cannot be listed, ${nodeWords(fault)}` }]
      : [];
  });
  return [...unseen, ...unlisted];
}

/**
 * An engine whose node cannot be used is waited on, never acted on: in --once it is re-observed on
 * the resync cadence for as long as an outwaited step failure is (NARWHAL_ONCE_OUTWAIT_MS); then
 * `signal` aborts and the run ends with the other nodes' engines reconciled. `tick` resolves after
 * the next re-observation was asked for (false: the bound passed).
 */
function outwaitNodes(
  controller: Controller,
  config: Config,
  desired: DesiredState,
): { signal: AbortSignal; tick(): Promise<boolean>; dispose(): void } {
  const ac = new AbortController();
  const bound = config.retry.onceOutwaitMs;
  let since: number | null = null;
  let ticked: Array<(more: boolean) => void> = [];
  const release = (more: boolean) => {
    for (const r of ticked.splice(0)) r(more);
  };
  const timer = setInterval(
    () => {
      if (nodeBlocked(controller.observed, desired).length === 0) since = null;
      else {
        since ??= Date.now();
        if (Date.now() - since >= bound) {
          ac.abort();
          return release(false);
        }
        controller.resync();
      }
      release(true);
    },
    Math.max(50, Math.min(config.watch.resyncMs, Math.ceil(bound / 4))),
  );
  return {
    signal: ac.signal,
    tick: () => (ac.signal.aborted ? Promise.resolve(false) : new Promise((r) => ticked.push(r))),
    dispose: () => {
      clearInterval(timer);
      release(false);
      ticked = [];
    },
  };
}

export async function reconcileOnce(
  config: Config,
  log: Logger,
  format: string,
  write: (s: string) => void,
  live: LiveView | null = null,
): Promise<number> {
  const began = Date.now();
  // Validate before taking the lock: an invalid desired state starts or stops nothing.
  const desired = await loadDesiredExplained(config);
  const controller = controllerFor(config, log, "once", undefined, fanOut(liveObserver(live)));
  await controller.open();
  // The live block is erased before the result is written below it.
  const { code, state } = await convergeOnce(controller, config, desired, format, (s) => (live?.close(), write(s)));
  log.info(convergedSummary(state, desired, Date.now() - began, code === EXIT.ok));
  return code;
}

/** The live view is one subscriber of the controller's observer (watch mode's metrics, when on, the other). */
const liveObserver = (live: LiveView | null): ObserverSubscriber | undefined =>
  live ? { step: (engine, p) => live.update(engine, p) } : undefined;

export async function reconcileWatch(config: Config, log: Logger, live: LiveView | null = null): Promise<number> {
  // Bound before the state lock is taken: an address that cannot be served changes nothing.
  // prom-client is loaded only when metrics are on.
  const metrics = config.metrics.address ? await (await import("../metrics/start.js")).startMetrics(config, log) : null;
  const observer = fanOut(metrics?.observer, liveObserver(live));
  const controller = controllerFor(config, log, "watch", undefined, observer);
  try {
    await controller.open();
  } catch (err) {
    await metrics?.close();
    throw err;
  }
  metrics?.watch(controller);
  // chokidar (desired/ and the request files) is watch mode's alone: `reconcile --once` never loads it.
  const [{ watchDesired }, { serveRequests }] = await Promise.all([
    import("../controller/watch.js"),
    import("../controller/request-server.js"),
  ]);
  // narwhal suspend|resume|retry while this controller holds the lock: request files, answered here.
  const requests = await serveRequests(config.stateDir, (req) => controller.request(req), log);
  const shutdown = onShutdown();
  // Reloads are read one after another so an older read never overrides a newer one; each only
  // hands the controller a desired state (its queue coalesces the work), so they cannot pile up.
  let reloads: Promise<void> = Promise.resolve();
  let applied: DesiredState | undefined; // the desired state last applied: which node each engine's runs are on
  const reload = () => {
    reloads = reloads.then(async () => {
      try {
        const desired = await loadDesiredExplained(config);
        controller.apply(desired);
        applied = desired;
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
  // Run directories beyond the newest NARWHAL_KEEP_RUNS go once converged, checked before each resync queues work.
  const pruner = watchPruner(
    config,
    log,
    () => controller.settled(),
    () => applied,
    () => controller.stateChanges(),
  );
  const timer = setInterval(() => {
    pruner.tick();
    controller.resync();
  }, config.watch.resyncMs);
  // The decodes' KV metrics are scraped every kv_transfer.watch_interval_s, re-read at each scrape
  // (an edit applies at the next one); while it is off or not loaded yet, looked at again each second.
  let kvTimer: NodeJS.Timeout | undefined;
  const kvTick = (scrape: boolean) => {
    if (scrape) controller.scrapeKv();
    const every = controller.kvWatchIntervalMs();
    kvTimer = setTimeout(() => kvTick(every > 0), every || Math.min(1000, config.watch.resyncMs));
  };
  kvTick(false);
  try {
    await new Promise<void>((resolve) => shutdown.signal.addEventListener("abort", () => resolve(), { once: true }));
  } finally {
    clearInterval(timer);
    clearTimeout(kvTimer);
    shutdown.dispose();
    await watcher.close();
    await requests.close();
    await reloads;
    await pruner.idle();
    try {
      await controller.close();
    } finally {
      await metrics?.close();
    }
    log.info("controller stopped; engines keep running");
  }
  return EXIT.ok;
}
