#!/usr/bin/env node
// The cost of one persisted transition at 10 / 100 / 1000 engines, and how many writes a no-op and a
// burst of same-tick updates make. Run after `npm run build`:
//
//   node bench/state-store.mjs [--runs 25] [--sizes 10,100,1000] [--base /other/checkout] [--json out.json (default: $TMPDIR/narwhal-state-store-bench.json)]
//
// Wall time of StateStore.update() until it is on disk (what a phase actor waits for), medians of
// --runs transitions on a state of N engines whose records are the size of a real captured engine's
// (about 8 KiB: history, xstate snapshot, layout). --base names another built checkout measured side by side.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "25" },
    sizes: { type: "string", default: "10,100,1000" },
    base: { type: "string" },
    json: { type: "string", default: path.join(os.tmpdir(), "narwhal-state-store-bench.json") },
  },
});
const runs = Number(values.runs);
const sizes = values.sizes.split(",").map(Number);

/** A captured engine's record, shaped and sized as the controller writes one. */
function record(engine, i) {
  const at = new Date(Date.UTC(2026, 0, 1, 0, 0, i % 60)).toISOString();
  const history = Array.from({ length: 50 }, (_, k) => ({
    at,
    from: `phase-${k}`,
    to: `phase-${k + 1}`,
    event: "DONE",
  }));
  return {
    engine,
    backend: "native",
    phase: "captured",
    desired_hash: "1".repeat(64),
    running_hash: "1".repeat(64),
    group_signature: "a".repeat(16),
    run_dir: `/state/runs/${engine}/20260101T000000Z-11111111`,
    plan_sha256: "2".repeat(64),
    handle: {
      kind: "native",
      pid: 4242 + i,
      pgid: 4242 + i,
      boot_id: "b".repeat(36),
      start_ticks: 100,
      launch_token: "t".repeat(32),
    },
    inspection: { accelerator: "nvidia", image_id: null, model_config_sha256: "3".repeat(64), physical_gpu_count: 2 },
    checked: { vllm_api_version: "0.11.0", image_id: null, nixl_compat_hash: "4".repeat(64) },
    layout: {
      captured_at: at,
      engine,
      group_signature: "a".repeat(16),
      block_size: 16,
      num_gpu_blocks: 2048,
      gpu_kv_cache_tokens: 32768,
      cache_dtype: "auto",
      tensor_parallel_size: 1,
    },
    conditions: ["Ready", "UpToDate", "Failed", "NodeReachable"].map((type) => ({
      type,
      status: "True",
      reason: "Captured",
      message: `engine ${engine} is serving`,
      lastTransitionTime: at,
    })),
    last_error: null,
    attempts: 0,
    retry_at: null,
    history,
    snapshot: {
      status: "active",
      value: "captured",
      context: { engine, desiredHash: "1".repeat(64), pad: "x".repeat(3000) },
      children: {},
    },
    updated_at: at,
    role: "decode",
    applied_inputs: { model: "m", port: 8000 + i, args: ["--max-model-len", "4096"] },
    observed_at: at,
    halted: null,
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const p90 = (xs) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.9))];

async function measure(dir, n) {
  const { StateStore } = await import(pathToFileURL(path.join(dir, "dist/src/state/store.js")).href);
  const stateDir = fs.mkdtempSync(path.join(fs.realpathSync("/tmp"), "narwhal-bench-store-"));
  try {
    const engines = Object.fromEntries(Array.from({ length: n }, (_, i) => [`engine-${i}`, record(`engine-${i}`, i)]));
    // Synced, as the store writes it: dirty pages of a 10 MB file would be flushed by the first fsyncs measured.
    const fd = fs.openSync(path.join(stateDir, "narwhal.json"), "w", 0o600);
    fs.writeFileSync(fd, JSON.stringify({ version: 1, engines }, null, 2) + "\n");
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    let writes = 0;
    const store = await StateStore.open(stateDir, undefined, () => void writes++);
    const times = [];
    for (let k = 0; k < runs; k++) {
      const name = `engine-${k % n}`;
      const began = performance.now();
      await store.update(name, (prev) => ({
        ...prev,
        phase: k % 2 ? "captured" : "probed",
        history: [
          ...prev.history,
          { at: new Date().toISOString(), from: prev.phase, to: k % 2 ? "captured" : "probed" },
        ],
      }));
      times.push(performance.now() - began);
    }
    // A no-op: the same record again (a snapshot that did not change), then 100 engines marked in one tick.
    writes = 0;
    await store.update("engine-0", (prev) => ({ ...prev }));
    const noop = writes;
    writes = 0;
    const burst = performance.now();
    await Promise.all(
      Object.keys(engines)
        .slice(0, 100)
        .map((name) =>
          store.update(name, (prev) => ({ ...prev, observed_at: new Date(Date.now() + 1).toISOString() })),
        ),
    );
    const burstMs = performance.now() - burst;
    const burstWrites = writes;
    await store.close?.();
    return {
      engines: n,
      median_ms: median(times),
      p90_ms: p90(times),
      noop_writes: noop,
      burst_writes: burstWrites,
      burst_ms: burstMs,
    };
  } finally {
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
}

const builds = [
  { name: "this", dir: root },
  ...(values.base ? [{ name: "base", dir: path.resolve(values.base) }] : []),
];
const rows = [];
for (const n of sizes) for (const b of builds) rows.push({ build: b.name, ...(await measure(b.dir, n)) });

const fmt = (x) => (typeof x === "number" && !Number.isInteger(x) ? x.toFixed(1) : String(x));
const cols = ["build", "engines", "median_ms", "p90_ms", "noop_writes", "burst_writes", "burst_ms"];
console.log(`one persisted transition (${runs} runs; node ${process.version}, ${process.platform}):`);
console.log(cols.map((c) => c.padStart(13)).join(""));
for (const r of rows) console.log(cols.map((c) => fmt(r[c]).padStart(13)).join(""));
console.log(
  "noop_writes: writes of an update that changes nothing; burst_writes: writes of one update to each of (at most) 100 engines issued together",
);
fs.writeFileSync(values.json, JSON.stringify({ runs, node: process.version, rows }, null, 2) + "\n");
console.log(`written to ${values.json}`);
