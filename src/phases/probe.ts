// probe: prove the live HTTP process (seed 000 "Prove the live HTTP process").
// /health, the exact /version the check recorded, the served model in
// /v1/models, process_start_time_seconds in /metrics (and equal to the
// recorded process's own start), one deterministic completion. Each response
// is captured with an exclusive create; a repeat uses fresh names.
import path from "node:path";
import type { EngineHandle, PreparedRun, ProbeResult } from "./types.js";
import type { EngineBackend } from "../backends/types.js";
import { runKeyHeaders } from "./run-env.js";
import { readVerifiedPlan } from "./plan-binding.js";
import { PhaseError } from "../errors.js";
import { httpRequest, joinUrl } from "./http.js";
import { freshName } from "../state/run-dir.js";
import { writeFileExclusive } from "../state/atomic-file.js";
import { parsePrometheus, sampleValue } from "./prometheus.js";
import { keyNotEnforced, planHasKey } from "./key-enforcement.js";

export const PROBED_FILE = "probed.json";
const TIMEOUT_MS = 60_000;
/** /metrics start time vs the process's own: clock granularity and container runtime delay. */
const START_TIME_TOLERANCE_S = 5;

export interface ProbeOptions {
  backend: EngineBackend;
  handle: EngineHandle;
  signal: AbortSignal;
}

export async function probe(run: PreparedRun, opts: ProbeOptions): Promise<ProbeResult> {
  const fail = (message: string, input: string, fix: string, retryable = false) =>
    new PhaseError(run.engine, "probe", message, { retryable, input, fix });
  const { plan, checked } = await readVerifiedPlan(run, "probe");
  const headers = await runKeyHeaders(run.dir);
  const files: Record<string, string> = {};

  const capture = async (p: string, filename: string, body?: unknown): Promise<Buffer> => {
    let res;
    try {
      res = await httpRequest(joinUrl(plan.endpoint, p), { signal: opts.signal, timeoutMs: TIMEOUT_MS, headers, body });
    } catch (err) {
      opts.signal.throwIfAborted();
      throw fail(
        `GET ${p} failed: ${(err as Error).message}`,
        plan.endpoint,
        "Check that the engine listens on its planned endpoint.",
        true,
      );
    }
    const name = await freshName(run.dir, filename);
    await writeFileExclusive(path.join(run.dir, name), res.body);
    files[filename] = name;
    if (res.status !== 200) {
      throw fail(
        `${p} answered HTTP ${res.status} (captured in ${name})`,
        plan.endpoint,
        res.status === 401
          ? "Check NARWHAL_ENGINE_API_KEY matches the engine's --api-key."
          : "Read the capture and the engine log.",
        res.status >= 500,
      );
    }
    return res.body;
  };

  await capture("/health", "health.txt");
  // "captured" must never mean "open": an engine with a key refuses /v1 without it.
  const open = planHasKey(plan)
    ? await keyNotEnforced(plan, TIMEOUT_MS, opts.signal).catch((err: Error) => {
        opts.signal.throwIfAborted();
        throw fail(
          `GET /v1/models without the API key failed: ${err.message}`,
          plan.endpoint,
          "Check that the engine listens on its planned endpoint.",
          true,
        );
      })
    : null;
  if (open) {
    throw fail(
      `${open}: the engine serves without its key`,
      plan.endpoint,
      "Check that the image's entrypoint passes VLLM_API_KEY (or --api-key) to vLLM; narwhal never captures an engine that serves without its key.",
    );
  }
  const version =
    (JSON.parse((await capture("/version", "version.json")).toString()) as { version?: string }).version ?? "";
  if (version !== checked.vllm_api_version) {
    throw fail(
      `/version returned ${JSON.stringify(version)}; checked image expects ${JSON.stringify(checked.vllm_api_version)}`,
      plan.endpoint,
      "First check which process owns the endpoint and compare it with the recorded image and process identity; response captures are immutable, so repair into a new launch directory.",
    );
  }
  const models =
    (JSON.parse((await capture("/v1/models", "models.json")).toString()) as { data?: Array<{ id: string }> }).data?.map(
      (m) => m.id,
    ) ?? [];
  if (!models.includes(plan.model.served_name)) {
    throw fail(
      `/v1/models lists ${JSON.stringify(models)}, not the configured model ${JSON.stringify(plan.model.served_name)}`,
      "NARWHAL_ENGINE_MODEL_NAME",
      "Check which process owns the endpoint and its --served-model-name.",
    );
  }
  const metrics = parsePrometheus((await capture("/metrics", "metrics.txt")).toString());
  const started = sampleValue(metrics, "process_start_time_seconds");
  if (started === undefined) {
    throw fail(
      "/metrics has no process_start_time_seconds",
      "/metrics",
      "The endpoint's process cannot be identified; check which process owns the endpoint.",
    );
  }
  const own = await opts.backend.processStartTime(opts.handle);
  if (own !== null && Math.abs(own - started) > START_TIME_TOLERANCE_S) {
    throw fail(
      `the process answering ${plan.endpoint} started at ${started}, but the recorded engine started at ${own.toFixed(2)}`,
      plan.endpoint,
      "Another process owns the endpoint: find and stop it, then prepare a new run.",
    );
  }
  const completion = JSON.parse(
    (
      await capture("/v1/completions", "completion.json", {
        model: plan.model.served_name,
        prompt: "The sea is",
        max_tokens: 32,
        temperature: 0,
      })
    ).toString(),
  ) as { choices?: Array<{ text?: string }> };
  const text = completion.choices?.[0]?.text ?? "";
  if (!text)
    throw fail(
      "the deterministic completion returned no text",
      "/v1/completions",
      "Read completion.json and the engine log.",
      true,
    );

  const result: ProbeResult = {
    probed_at: new Date().toISOString(),
    version,
    models,
    process_start_time_seconds: started,
    completion_text: text,
    files,
  };
  await writeFileExclusive(
    path.join(run.dir, await freshName(run.dir, PROBED_FILE)),
    JSON.stringify(result, null, 2) + "\n",
  );
  return result;
}
