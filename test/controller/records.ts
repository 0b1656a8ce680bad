// Fixture builders for state records: a captured engine as plain data.
import type { EngineRecord, StateFile } from "../../src/state/store.js";
import type { CacheLayout } from "../../src/phases/types.js";

export const SIG_A = "aaaaaaaaaaaaaaaa";
export const SIG_B = "bbbbbbbbbbbbbbbb";

export function layout(engine: string, over: Partial<CacheLayout> = {}): CacheLayout {
  return {
    captured_at: "2025-01-01T00:00:00.000Z",
    engine,
    group_signature: SIG_A,
    block_size: 16,
    num_gpu_blocks: 2048,
    gpu_kv_cache_tokens: 32768,
    cache_dtype: "auto",
    tensor_parallel_size: 1,
    ...over,
  };
}

export function record(engine: string, over: Partial<EngineRecord> = {}): EngineRecord {
  return {
    engine,
    backend: "native",
    phase: "captured",
    desired_hash: "1".repeat(64),
    running_hash: "1".repeat(64),
    group_signature: SIG_A,
    run_dir: `/state/runs/${engine}/20250101T000000Z-11111111`,
    plan_sha256: "2".repeat(64),
    handle: { kind: "native", pid: 4242, pgid: 4242, boot_id: "boot", start_ticks: 100, launch_token: "t" },
    inspection: null,
    checked: null,
    layout: layout(engine),
    conditions: [],
    last_error: null,
    attempts: 0,
    retry_at: null,
    history: [],
    snapshot: { value: "captured", context: { engine } },
    updated_at: "2025-01-01T00:00:00.000Z",
    ...over,
  };
}

export function stateFile(records: EngineRecord[]): StateFile {
  return { version: 1, engines: Object.fromEntries(records.map((r) => [r.engine, r])) };
}
