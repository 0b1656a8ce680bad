// Turning an engine actor's snapshot into its state-file record: what
// `narwhal status` shows and what a restarted controller resumes from.
import type { EngineContext } from "../../machines/engine.js";
import type { Condition, EngineRecord } from "../state/store.js";

export function conditionsFor(phase: string, ctx: EngineContext, now: string): Condition[] {
  const c = (type: string, ok: boolean, reason: string, message: string): Condition => ({ type, status: ok ? "True" : "False", reason, message, at: now });
  const conditions = [
    c("Ready", phase === "captured", phase === "captured" ? "Captured" : phase, phase === "captured" ? "serving; cache layout captured" : `engine is ${phase}`),
    c("UpToDate", ctx.runningHash === null || ctx.runningHash === ctx.desiredHash, ctx.runningHash === ctx.desiredHash ? "HashMatches" : "HashDiffers", "running input hash vs desired input hash"),
  ];
  if (ctx.error) {
    const e = ctx.error;
    conditions.push(c("Failed", false, ctx.terminal ? "Terminal" : "Retrying", `${e.step ?? "?"}: ${e.message}`));
  }
  return conditions;
}

/**
 * Transitions kept per engine: an outwaited cause is re-checked every resync period for as long
 * as it lasts, so an uncapped history would grow the state file without end.
 */
export const HISTORY_LIMIT = 200;

export function recordFrom(prev: EngineRecord | undefined, phase: string, ctx: EngineContext, backend: string, snapshot: unknown, event?: string): EngineRecord {
  const now = new Date().toISOString();
  const history = [...(prev?.history ?? [])];
  if (!prev || prev.phase !== phase) {
    const note = phase === "failed" && ctx.error ? `${ctx.error.step ?? ""}: ${ctx.error.message}`.slice(0, 300) : undefined;
    history.push({ at: now, from: prev?.phase ?? "none", to: phase, ...(event ? { event } : {}), ...(note ? { note } : {}) });
  }
  return {
    engine: ctx.engine,
    backend,
    phase,
    desired_hash: ctx.desiredHash,
    running_hash: ctx.runningHash,
    group_signature: ctx.inspection?.group_signature ?? prev?.group_signature ?? null,
    run_dir: ctx.run?.dir ?? null,
    plan_sha256: ctx.run?.plan_sha256 ?? null,
    handle: ctx.handle,
    inspection: ctx.inspection
      ? { accelerator: ctx.inspection.accelerator, image_id: ctx.inspection.image_id, model_config_sha256: ctx.inspection.model_config_sha256, physical_gpu_count: ctx.inspection.physical_gpu_count }
      : null,
    checked: ctx.checked ? { vllm_api_version: ctx.checked.vllm_api_version, image_id: ctx.checked.image_id } : null,
    layout: ctx.layout,
    conditions: conditionsFor(phase, ctx, now),
    last_error: ctx.error,
    attempts: ctx.attempts,
    retry_at: ctx.retryAt,
    history: history.slice(-HISTORY_LIMIT),
    snapshot,
    updated_at: now,
  };
}
