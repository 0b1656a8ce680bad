// The `--run` actions of `narwhal engine`: each loads the launch directory,
// refuses what would rewrite its evidence, and calls the same phase function
// the engine machine (or start-shared) uses. Results are plain data for result.ts.
import fs from "node:fs/promises";
import path from "node:path";
import type { EngineSpec } from "../../desired/types.js";
import { check, CHECKED_FILE, checkLogName } from "../../phases/check.js";
import { start } from "../../phases/start.js";
import { capture, LAYOUT_FILE } from "../../phases/capture.js";
import { measureCache } from "../../phases/measure-cache.js";
import { modelDimensions, type RuntimeInspectOptions } from "../../phases/runtime-inspect.js";
import { handshakePolicy } from "../../phases/handshake-policy.js";
import { cacheRegistration, CACHE_REGISTRATION_FILE } from "../../phases/cache-registration.js";
import type { RegistrationSource } from "../../phases/registration-source.js";
import { startShared, SHARED_START_FILE } from "../../phases/start-shared.js";
import { stopNative, NATIVE_STOP_FILE } from "../../phases/stop-native.js";
import { blockedListeners, checkListeners } from "../../phases/listeners.js";
import {
  loadCheckedRun,
  loadRun,
  refuseExisting,
  refuseUsed,
  requireHandle,
  startedFile,
} from "../../phases/checked-run.js";
import { refusal } from "../../phases/action-error.js";
import { ENGINE_LOG } from "../../backends/native.js";
import { engineResult, type EngineResult } from "./result.js";
import type { ActionContext } from "./context.js";
import { LocalHost } from "../../hosts/local.js";

/**
 * The manual engine actions run in the engine-role shell on the engine's own host (seed 001),
 * so the node their listener and GPU checks read is this machine.
 */
export function thisHost(ctx: ActionContext, node = "local"): LocalHost {
  return new LocalHost(node, ctx.config.hostEnv, { ownDirs: [ctx.config.stateDir] });
}

const inspectOpts = (ctx: ActionContext, backend: EngineSpec["backend"]): RuntimeInspectOptions => ({
  backend: ctx.backends[backend],
  scriptPath: ctx.inspectScript,
  signal: ctx.signal,
});

export async function checkAction(ctx: ActionContext, dir: string): Promise<EngineResult> {
  const { run, plan } = await loadRun("check", dir);
  const checked = await check(run, {
    backend: ctx.backends[plan.backend],
    scriptPath: ctx.checkScript,
    signal: ctx.signal,
    force: true,
    launcher: ctx.app.launcher,
  });
  const log = path.join(run.dir, checkLogName(plan.backend));
  const attempts = ((await fs.readFile(log, "utf8").catch(() => "")).match(/^=== inspection /gm) ?? []).length;
  return engineResult("check", run.dir, {
    engine: plan.engine,
    files: { [CHECKED_FILE]: path.join(run.dir, CHECKED_FILE), [checkLogName(plan.backend)]: log },
    summary: [
      `plan ${checked.plan_sha256.slice(0, 12)} checked: vLLM ${checked.vllm_api_version}, ${Object.entries(
        checked.packages,
      )
        .map(([k, v]) => `${k}==${v}`)
        .join(" ")}`,
      `${attempts} check attempt(s) in ${path.basename(log)}`,
    ],
    details: { checked, attempts },
  });
}

export async function startAction(ctx: ActionContext, dir: string, readySeconds: number): Promise<EngineResult> {
  const action = "start";
  const loaded = await loadCheckedRun(action, dir);
  await refuseUsed(action, loaded);
  const { run, plan } = loaded;
  const blocked = blockedListeners(await checkListeners(thisHost(ctx, plan.node?.name), run.dir, plan, ctx.env));
  if (blocked.length)
    throw refusal(action, `planned listeners are not free: ${blocked.join("; ")}`, {
      engine: plan.engine,
      run: run.dir,
      input: "ports",
      fix: "Any existing listener blocks launch until ownership is resolved: find it with ss -ltnp.",
    });
  const handle = await start(run, {
    backend: ctx.backends[plan.backend],
    signal: ctx.signal,
    readySeconds,
    stopGraceMs: ctx.config.stopGraceMs,
  });
  const process = await ctx.backends[plan.backend].describeProcess(handle);
  const files: Record<string, string> = { [startedFile(plan)]: path.join(run.dir, startedFile(plan)) };
  if (plan.backend === "native") files[ENGINE_LOG] = path.join(run.dir, ENGINE_LOG);
  return engineResult(action, run.dir, {
    engine: plan.engine,
    files,
    summary: [
      `${plan.engine} answers ${plan.endpoint}/health: ${handle.kind === "container" ? `container ${handle.container_id.slice(0, 12)}` : `pid ${handle.pid}`}`,
    ],
    details: { handle, process },
  });
}

export async function captureCacheAction(ctx: ActionContext, dir: string): Promise<EngineResult> {
  const action = "capture-cache";
  const loaded = await loadCheckedRun(action, dir);
  await refuseExisting(action, loaded, [LAYOUT_FILE]);
  const handle = await requireHandle(action, loaded);
  const { run, plan } = loaded;
  const layout = await capture(run, {
    backend: ctx.backends[plan.backend],
    handle,
    groupSignature: plan.group_signature,
    signal: ctx.signal,
  });
  return engineResult(action, run.dir, {
    engine: plan.engine,
    files: { [LAYOUT_FILE]: path.join(run.dir, LAYOUT_FILE) },
    summary: [
      `${layout.num_gpu_blocks} blocks of ${layout.block_size} tokens (${layout.gpu_kv_cache_tokens} tokens, ${layout.cache_dtype}), TP ${layout.tensor_parallel_size}`,
    ],
    details: { layout },
  });
}

export async function measureCacheAction(ctx: ActionContext, dir: string, readySeconds: number): Promise<EngineResult> {
  const { plan } = await loadRun("measure-cache", dir);
  const measured = await measureCache(dir, {
    backend: ctx.backends[plan.backend],
    signal: ctx.signal,
    readySeconds,
    stopGraceMs: ctx.config.stopGraceMs,
  });
  const runDir = path.resolve(dir);
  const { layout, sizing } = measured;
  return engineResult("measure-cache", runDir, {
    engine: plan.engine,
    files: { [LAYOUT_FILE]: path.join(runDir, LAYOUT_FILE) },
    summary: [
      `${layout.num_gpu_blocks} blocks of ${layout.block_size} tokens (${layout.gpu_kv_cache_tokens} tokens)`,
      `sizing ${sizing.kind === "container" ? `container ${sizing.container_id.slice(0, 12)}` : `process ${sizing.pid}`} removed`,
    ],
    details: { ...measured },
  });
}

export async function modelDimensionsAction(ctx: ActionContext, dir: string): Promise<EngineResult> {
  const { plan } = await loadRun("model-dimensions", dir);
  const { file, content } = await modelDimensions(dir, inspectOpts(ctx, plan.backend));
  const c = content as { num_hidden_layers: number; num_kv_heads: number; head_size: number; dtype: string };
  return engineResult("model-dimensions", path.dirname(file), {
    engine: plan.engine,
    files: { [path.basename(file)]: file },
    summary: [`${c.num_hidden_layers} layers, ${c.num_kv_heads} KV heads of size ${c.head_size}, ${c.dtype}`],
    details: content,
  });
}

export async function handshakePolicyAction(ctx: ActionContext, dir: string): Promise<EngineResult> {
  const { plan } = await loadRun("handshake-policy", dir);
  const { file, content } = await handshakePolicy(dir, inspectOpts(ctx, plan.backend));
  return engineResult("handshake-policy", path.dirname(file), {
    engine: plan.engine,
    files: { [path.basename(file)]: file },
    summary: [
      `compatibility hash ${String(content.compatibility_hash).slice(0, 16)} over ${JSON.stringify(content.compatibility)}`,
    ],
    details: content,
  });
}

export async function cacheRegistrationAction(
  ctx: ActionContext,
  dir: string,
  source: RegistrationSource,
): Promise<EngineResult> {
  const { plan } = await loadRun("cache-registration", dir);
  const { file, content } = await cacheRegistration(dir, source, inspectOpts(ctx, plan.backend));
  return engineResult("cache-registration", path.dirname(file), {
    engine: plan.engine,
    files: { [CACHE_REGISTRATION_FILE]: file },
    summary: [
      `${(content.block_grouping as unknown[]).length} block group(s), ${String(content.bytes_per_rank)} bytes registered per rank, from ${(content.source as { kind: string }).kind}`,
    ],
    details: content,
  });
}

export async function startSharedAction(
  ctx: ActionContext,
  dirs: string[],
  backend: EngineSpec["backend"],
  readySeconds: number,
  progress: (s: string) => void,
): Promise<EngineResult> {
  const result = await startShared(dirs, {
    host: thisHost(ctx),
    backend: ctx.backends[backend],
    signal: ctx.signal,
    readySeconds,
    stopGraceMs: ctx.config.stopGraceMs,
    env: ctx.env,
    progress,
  });
  return engineResult(
    "start-shared",
    result.records.map((r) => r.run),
    {
      engine: result.records.map((r) => r.engine),
      files: Object.fromEntries(result.files.map((f) => [`${path.basename(path.dirname(f))}/${SHARED_START_FILE}`, f])),
      summary: [
        `${result.records.length} engines on ${result.budget.gpu_uuid}: gpu_memory_utilization ${result.budget.utilizations.map((u) => u.gpu_memory_utilization).join(" + ")} = ${result.budget.sum} ≤ ${result.budget.device_allowance}`,
        ...result.records.map(
          (r) =>
            `${r.engine}: +${r.increase_mib?.engine} MiB (aggregate ${r.increase_mib?.aggregate} of ${r.allowance.allowance_mib} MiB allowed)`,
        ),
      ],
      details: { budget: result.budget, records: result.records },
    },
  );
}

export async function stopNativeAction(ctx: ActionContext, dir: string): Promise<EngineResult> {
  const action = "stop-native";
  const loaded = await loadRun(action, dir);
  if (loaded.plan.backend !== "native")
    throw refusal(
      action,
      `${loaded.run.dir} is a ${loaded.plan.backend} plan; stop-native stops native process groups`,
      { engine: loaded.plan.engine, run: loaded.run.dir, input: "--run" },
    );
  await refuseExisting(action, loaded, [NATIVE_STOP_FILE]);
  const handle = await requireHandle(action, loaded);
  const record = await stopNative(loaded.run, handle, {
    backend: ctx.backends.native,
    graceMs: ctx.config.stopGraceMs,
    hosts: ctx.hosts,
  });
  return engineResult(action, loaded.run.dir, {
    engine: loaded.plan.engine,
    files: { [NATIVE_STOP_FILE]: path.join(loaded.run.dir, NATIVE_STOP_FILE) },
    summary: [
      `process group ${record.pgid} (${record.group_before.length} process(es)) stopped${record.escalated_to_sigkill ? " after SIGKILL" : ""}`,
    ],
    details: { ...record },
  });
}
