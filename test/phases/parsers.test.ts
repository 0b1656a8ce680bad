// The text parsers the phases rely on: /metrics, the startup log, the check
// script's result line and the startup-failure diagnosis.
import { describe, expect, it } from "vitest";
import { parsePrometheus, sampleLabels, sampleValue } from "../../src/phases/prometheus.js";
import { parseStartupLog } from "../../src/phases/capture.js";
import { layoutKey } from "../../src/controller/groups.js";
import { checkLogName, parseScriptResult, RESULT_PREFIX } from "../../src/phases/check.js";
import { diagnoseStartupLog } from "../../src/phases/start.js";
import type { CacheLayout } from "../../src/phases/types.js";

const METRICS = [
  "# HELP python_gc_objects_collected_total Objects collected during gc",
  "# TYPE python_gc_objects_collected_total counter",
  'python_gc_objects_collected_total{generation="0"} 1234.0',
  "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
  "# TYPE process_start_time_seconds gauge",
  "process_start_time_seconds 1.7e9",
  "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
  "# TYPE vllm:cache_config_info gauge",
  'vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",enable_prefix_caching="False",gpu_memory_utilization="0.9",num_cpu_blocks="None",num_gpu_blocks="2048",prefix_caching_hash_algo="builtin",sliding_window="None",swap_space_bytes="4294967296"} 1.0',
  "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
  "# TYPE vllm:kv_cache_usage_perc gauge",
  'vllm:kv_cache_usage_perc{engine="0",model_name="tiny \\"quoted\\" name"} 0.0',
  'vllm:num_requests_running{engine="0",model_name="a\\\\b\\nc"} 3',
  'vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 7.0',
  "vllm:nixl_num_failed_transfers_total 0 1700000000000",
  "weird_inf +Inf",
  "",
].join("\n");

describe("parsePrometheus", () => {
  const samples = parsePrometheus(METRICS);

  it("skips HELP/TYPE lines and blank lines", () => {
    expect(samples.map((s) => s.name)).toEqual([
      "python_gc_objects_collected_total",
      "process_start_time_seconds",
      "vllm:cache_config_info",
      "vllm:kv_cache_usage_perc",
      "vllm:num_requests_running",
      "vllm:e2e_request_latency_seconds_bucket",
      "vllm:nixl_num_failed_transfers_total",
      "weird_inf",
    ]);
  });

  it("reads scientific notation and timestamps", () => {
    expect(sampleValue(samples, "process_start_time_seconds")).toBe(1.7e9);
    expect(sampleValue(samples, "vllm:nixl_num_failed_transfers_total")).toBe(0);
    expect(sampleValue(samples, "weird_inf")).toBe(Infinity);
    expect(sampleValue(samples, "missing")).toBeUndefined();
  });

  it("reads vllm:cache_config_info's labels with colons in the name", () => {
    const info = sampleLabels(samples, "vllm:cache_config_info");
    expect(info).toMatchObject({
      block_size: "16",
      num_gpu_blocks: "2048",
      cache_dtype: "auto",
      num_cpu_blocks: "None",
    });
    expect(Object.keys(info!)).toHaveLength(10);
    expect(sampleValue(samples, "vllm:cache_config_info")).toBe(1);
  });

  it("unescapes quotes, backslashes and newlines in label values", () => {
    expect(sampleLabels(samples, "vllm:kv_cache_usage_perc")).toEqual({
      engine: "0",
      model_name: 'tiny "quoted" name',
    });
    expect(sampleLabels(samples, "vllm:num_requests_running")).toEqual({ engine: "0", model_name: "a\\b\nc" });
    expect(sampleLabels(samples, "vllm:e2e_request_latency_seconds_bucket")?.le).toBe("+Inf");
  });

  it("ignores lines that are not samples", () => {
    expect(parsePrometheus('garbage line with words\n{no_name="x"} 1\n')).toEqual([]);
  });
});

describe("parseStartupLog", () => {
  it("reads tokens with thousands separators and the concurrency line", () => {
    const log = [
      "INFO 01-02 03:04:05 [kv_cache_utils.py:1087] GPU KV cache size: 1,234,560 tokens",
      "INFO 01-02 03:04:05 [kv_cache_utils.py:1091] Maximum concurrency for 4,096 tokens per request: 301.41x",
    ].join("\n");
    const parsed = parseStartupLog(log);
    expect(parsed.tokens).toBe(1_234_560);
    expect(parsed.concurrency).toEqual({ tokens_per_request: 4096, factor: 301.41 });
  });

  it("takes the minimum across repeated (per-rank) lines", () => {
    const log = [
      "(Worker_TP0 pid=101) INFO GPU KV cache size: 98,304 tokens",
      "(Worker_TP1 pid=102) INFO GPU KV cache size: 97,280 tokens",
      "(Worker_TP2 pid=103) INFO GPU KV cache size: 98,304 tokens",
    ].join("\n");
    expect(parseStartupLog(log).tokens).toBe(97_280);
  });

  it("recognises each worker prefix as a TP rank", () => {
    const log = [
      "(VllmWorker rank=0 pid=1) INFO x",
      "(VllmWorker TP1 pid=2) INFO x",
      "(Worker_TP2 pid=3) INFO x",
      "(EngineCore_DP0 rank=3) INFO x",
      "(Worker_TP12) INFO x",
    ].join("\n");
    expect([...parseStartupLog(log).ranks].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 12]);
  });

  it("does not read ranks from unrelated parentheses", () => {
    const log =
      "(APIServer pid=7) INFO started\n(EngineCore_DP0 pid=8) INFO GPU KV cache size: 10 tokens\nrank 4 of (8)";
    const parsed = parseStartupLog(log);
    expect([...parsed.ranks]).toEqual([]);
    expect(parsed.tokens).toBe(10);
  });

  it("reports nothing when profiling never finished", () => {
    const parsed = parseStartupLog("INFO loading weights\n");
    expect(parsed.tokens).toBeUndefined();
    expect(parsed.concurrency).toBeUndefined();
    expect(parsed.ranks.size).toBe(0);
  });
});

describe("layoutKey", () => {
  const layout = (over: Partial<CacheLayout> = {}): CacheLayout => ({
    captured_at: "2025-01-01T00:00:00Z",
    engine: "engine-1",
    group_signature: "0123456789abcdef",
    block_size: 16,
    num_gpu_blocks: 2048,
    gpu_kv_cache_tokens: 32768,
    cache_dtype: "auto",
    tensor_parallel_size: 2,
    ...over,
  });

  it("ignores who captured it and when", () => {
    expect(
      layoutKey(
        layout({
          engine: "engine-2",
          captured_at: "2026-01-01T00:00:00Z",
          max_concurrency: { tokens_per_request: 4096, factor: 8 },
        }),
      ),
    ).toBe(layoutKey(layout()));
  });

  it("differs on any geometry field", () => {
    const base = layoutKey(layout());
    for (const over of [
      { block_size: 32 },
      { num_gpu_blocks: 2047 },
      { gpu_kv_cache_tokens: 1 },
      { cache_dtype: "fp8" },
      { tensor_parallel_size: 4 },
    ]) {
      expect(layoutKey(layout(over))).not.toBe(base);
    }
  });
});

describe("parseScriptResult and checkLogName", () => {
  const result = (version: string) =>
    RESULT_PREFIX +
    JSON.stringify({
      ok: true,
      vllm_api_version: version,
      packages: {},
      connector: {},
      tokenizer: {},
      requires_trust_remote_code: false,
      ssm: { required: false, layout: null },
      failures: [],
    });

  it("takes the last result line, ignoring other output around it", () => {
    const out = ["loading...", result("0.10.0"), "warning: something", result("0.11.0"), "bye", ""].join("\n");
    expect(parseScriptResult(out)?.vllm_api_version).toBe("0.11.0");
  });

  it("returns null without a result line or with garbage after the prefix", () => {
    expect(parseScriptResult("")).toBeNull();
    expect(parseScriptResult("Traceback (most recent call last):\n  boom")).toBeNull();
    expect(parseScriptResult(`${RESULT_PREFIX}{not json`)).toBeNull();
    expect(parseScriptResult(`${result("0.11.0")}\n${RESULT_PREFIX}{truncated`)).toBeNull();
  });

  it("names the log by backend", () => {
    expect(checkLogName("container")).toBe("image-check.log");
    expect(checkLogName("native")).toBe("runtime-check.log");
  });
});

describe("diagnoseStartupLog", () => {
  // Every start logs its config; the setting named there is not a request for it.
  const CONFIG_LINE =
    "(EngineCore_DP0 pid=9) INFO [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='/model', trust_remote_code=True, dtype=torch.bfloat16";

  it("trust_remote_code requested by vLLM or transformers", () => {
    const vllm =
      "ValueError: Failed to load the model config. If the model is a custom model not yet available in the HuggingFace transformers library, consider setting `trust_remote_code=True` in LLM or using the `--trust-remote-code` flag in the CLI.";
    const hf =
      "ValueError: The repository /model contains custom code which must be executed to correctly load the model. Please pass the argument `trust_remote_code=True` to allow custom code to be run.";
    for (const log of [vllm, hf]) {
      const d = diagnoseStartupLog(`INFO starting\n${log}\n`);
      expect(d.cause).toMatch(/trust_remote_code=True/);
      expect(d.input).toBe("model auto_map");
    }
  });

  it("the DS conv-state layout", () => {
    const d = diagnoseStartupLog(
      "(Worker_TP0 pid=3) AssertionError: 3-read Mamba conv transfer requires DS conv state layout. Set VLLM_SSM_CONV_STATE_LAYOUT=DS",
    );
    expect(d.cause).toMatch(/VLLM_SSM_CONV_STATE_LAYOUT=DS/);
    expect(d.input).toMatch(/SSM/);
  });

  it("a port already in use", () => {
    expect(diagnoseStartupLog("OSError: [Errno 98] Address already in use").input).toBe("ports");
    expect(diagnoseStartupLog("Error: listen EADDRINUSE: address already in use :::8000").input).toBe("ports");
  });

  it("a rejected command line", () => {
    expect(diagnoseStartupLog("api_server.py: error: unrecognized arguments: --bogus").input).toBe(
      "runtime.extra_args",
    );
    expect(diagnoseStartupLog("api_server.py: error: argument --max-model-len: invalid int value: 'x'").input).toBe(
      "runtime.extra_args",
    );
  });

  it("an accelerator failure", () => {
    expect(diagnoseStartupLog("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB").input).toMatch(
      /gpu/,
    );
    expect(diagnoseStartupLog("RuntimeError: HIP error: invalid device ordinal").input).toMatch(/gpu/);
  });

  it("anything else is an unexplained exit without a named input", () => {
    const d = diagnoseStartupLog("Killed\n");
    expect(d.input).toBeUndefined();
    expect(d.cause).toBe("the engine exited during startup");
  });

  it("a remote-code model that fails for another reason is diagnosed by that reason", () => {
    expect(diagnoseStartupLog(`${CONFIG_LINE}\nOSError: [Errno 98] Address already in use`).input).toBe("ports");
    expect(diagnoseStartupLog(`${CONFIG_LINE}\ntorch.OutOfMemoryError: CUDA out of memory`).input).toMatch(/gpu/);
    expect(diagnoseStartupLog(`${CONFIG_LINE}\nSet VLLM_SSM_CONV_STATE_LAYOUT=DS`).cause).toMatch(/SSM_CONV/);
  });
});
