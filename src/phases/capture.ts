// capture: the live engine's KV-cache layout (seed 000 "Capture actual cache
// geometry"). Before reading, check it is still the recorded process from
// this checked plan and that every TP rank came up; then take page geometry
// from /metrics (vllm:cache_config_info) and capacity from the startup log.
import path from "node:path";
import type { CacheLayout, EngineHandle, PreparedRun } from "./types.js";
import type { EngineBackend } from "../backends/types.js";
import { readVerifiedPlan } from "./plan-binding.js";
import { PhaseError } from "../errors.js";
import { httpRequest, joinUrl } from "./http.js";
import { readJsonIfExists, writeFileExclusive } from "../state/atomic-file.js";
import { parsePrometheus, sampleLabels } from "./prometheus.js";

export const LAYOUT_FILE = "cache-layout.json";

const num = (s: string) => Number(s.replace(/,/g, ""));

/** `GPU KV cache size: 123,456 tokens` and `Maximum concurrency for 4,096 tokens per request: 12.34x`. */
export function parseStartupLog(log: string): {
  tokens?: number;
  concurrency?: { tokens_per_request: number; factor: number };
  ranks: Set<number>;
} {
  const tokens = [...log.matchAll(/GPU KV cache size: ([\d,]+) tokens/g)].map((m) => num(m[1]!));
  const conc = /Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x/.exec(log);
  const ranks = new Set<number>();
  // vLLM's multiprocessing workers prefix their lines: "(VllmWorker rank=1 pid=..)", "(Worker_TP1 pid=..)", "(VllmWorker TP1 pid=..)".
  for (const m of log.matchAll(/\((?:VllmWorker(?: rank=| TP)|Worker_TP|EngineCore_DP\d+ rank=)(\d+)[ )]/g))
    ranks.add(Number(m[1]));
  return {
    tokens: tokens.length ? Math.min(...tokens) : undefined,
    concurrency: conc ? { tokens_per_request: num(conc[1]!), factor: Number(conc[2]) } : undefined,
    ranks,
  };
}

export interface CaptureOptions {
  backend: EngineBackend;
  handle: EngineHandle;
  groupSignature: string;
  signal: AbortSignal;
}

export async function capture(run: PreparedRun, opts: CaptureOptions): Promise<CacheLayout> {
  const fail = (message: string, input: string, fix: string, retryable = false) =>
    new PhaseError(run.engine, "capture", message, { retryable, input, fix });
  const layoutPath = path.join(run.dir, LAYOUT_FILE);
  const existing = await readJsonIfExists<CacheLayout>(layoutPath);
  if (existing) return existing; // one layout per run; recapturing needs a fresh prepared run

  const { plan, planSha } = await readVerifiedPlan(run, "capture");
  if (opts.handle.launch_token !== plan.launch_token)
    throw fail("the recorded engine was not started from this plan", "launch token", "Prepare a fresh run.");
  // Container id, image and plan-hash labels (or pid, start tick and token): the layout must come from this plan's engine.
  const problems = await opts.backend.identityProblems(opts.handle, plan);
  if (problems.length)
    throw fail(
      `the running engine is not this plan's: ${problems.join("; ")}`,
      "engine identity",
      "Compare the recorded container or process with launch.json; narwhal restarts a lost engine from a fresh run.",
      true,
    );

  const log = await opts.backend.startupLog(run, opts.handle);
  const parsed = parseStartupLog(log.text);
  // The capacity is read from the log: when the read was cut short, say so and where the whole log is.
  const unread = log.problem ? ` (${log.problem})` : "";
  const tp = plan.gpu.tensor_parallel_size;
  if (tp > 1) {
    const missing = Array.from({ length: tp }, (_, r) => r).filter((r) => !parsed.ranks.has(r));
    if (missing.length)
      throw fail(
        `TP ranks ${missing.join(", ")} of ${tp} did not report in the startup log${unread}`,
        "tensor_parallel_size",
        "Read the engine log: every TP rank must start before the layout is captured.",
        true,
      );
  }
  if (parsed.tokens === undefined)
    throw fail(
      `the startup log has no 'GPU KV cache size: N tokens' line${unread}`,
      log.where,
      "Read the engine log; the engine must finish KV-cache profiling.",
      true,
    );

  let body: string;
  try {
    body = (
      await httpRequest(joinUrl(plan.endpoint, "/metrics"), { signal: opts.signal, timeoutMs: 30_000 })
    ).body.toString();
  } catch (err) {
    opts.signal.throwIfAborted();
    throw fail(
      `GET /metrics failed: ${(err as Error).message}`,
      plan.endpoint,
      "Check the engine still serves its endpoint.",
      true,
    );
  }
  const info = sampleLabels(parsePrometheus(body), "vllm:cache_config_info");
  if (!info)
    throw fail(
      "/metrics has no vllm:cache_config_info",
      "/metrics",
      "Use an image whose vLLM exports vllm:cache_config_info.",
    );
  const blockSize = Number(info.block_size);
  const blocks = Number(info.num_gpu_blocks);
  if (!Number.isInteger(blockSize) || !Number.isInteger(blocks)) {
    throw fail(
      `vllm:cache_config_info has no usable block_size/num_gpu_blocks (${JSON.stringify(info)})`,
      "/metrics",
      "Read metrics and the engine log.",
    );
  }
  const layout: CacheLayout = {
    captured_at: new Date().toISOString(),
    engine: run.engine,
    group_signature: opts.groupSignature,
    block_size: blockSize,
    num_gpu_blocks: blocks,
    gpu_kv_cache_tokens: parsed.tokens,
    cache_dtype: info.cache_dtype ?? "auto",
    tensor_parallel_size: tp,
    ...(parsed.concurrency ? { max_concurrency: parsed.concurrency } : {}),
  };
  const full = {
    ...layout,
    plan_sha256: planSha,
    launch_token: plan.launch_token,
    cache_config_info: info,
    handle: opts.handle,
  };
  await writeFileExclusive(layoutPath, JSON.stringify(full, null, 2) + "\n");
  return layout;
}
