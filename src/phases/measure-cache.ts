// measure-cache (seed 001): size the KV cache of a checked, unused plan with a
// temporary engine, write cache-layout.json, then remove it. Built from the
// engine machine's own steps: start (launch + readiness), capture (identity,
// TP ranks, startup log and /metrics geometry), and the backend's stop, which
// for a container also removes it and keeps its log as engine.log.
import type { CacheLayout, EngineHandle } from "./types.js";
import { start, type StartOptions } from "./start.js";
import { capture, LAYOUT_FILE } from "./capture.js";
import { loadCheckedRun, recordedHandle, refuseExisting, refuseUsed } from "./checked-run.js";
import { ActionError } from "./action-error.js";

/** The sizing engine starts like any engine: same backend, readiness budget and stop grace. */
export type MeasureCacheOptions = StartOptions;

export interface MeasureCacheResult {
  layout: CacheLayout;
  /** The temporary sizing engine (container id or process), removed afterwards. */
  sizing: EngineHandle;
  removed: boolean;
}

export async function measureCache(dir: string, opts: MeasureCacheOptions): Promise<MeasureCacheResult> {
  const action = "measure-cache";
  const loaded = await loadCheckedRun(action, dir);
  await refuseExisting(action, loaded, [LAYOUT_FILE]);
  await refuseUsed(action, loaded);
  const { run, plan } = loaded;
  let handle: EngineHandle | null = null;
  let layout: CacheLayout | undefined;
  // Boxed, so that a falsy thrown value still counts as a failure (a bare `if (err)` would drop it).
  let failure: { err: unknown } | undefined;
  try {
    handle = await start(run, opts);
    layout = await capture(run, {
      backend: opts.backend,
      handle,
      groupSignature: plan.group_signature,
      signal: opts.signal,
    });
  } catch (err) {
    failure = { err };
  }
  // The sizing engine is temporary whatever happened: remove it (a failed start may have left one behind).
  const sizing = handle ?? (await recordedHandle(run, plan));
  let removeError: unknown;
  if (sizing) await opts.backend.stop(sizing, opts.stopGraceMs).catch((err: unknown) => (removeError = err));
  if (failure) throw failure.err;
  if (removeError || !sizing || !layout) {
    throw new ActionError(
      action,
      `cache-layout.json was written, but the sizing engine ${sizing ? JSON.stringify(sizing) : ""} could not be removed: ${(removeError as Error)?.message ?? "unknown"}`,
      {
        engine: plan.engine,
        run: run.dir,
        retryable: true,
        fix: "Remove the recorded container or process by hand before reusing its ports.",
      },
    );
  }
  return { layout, sizing, removed: true };
}
