// Fixtures for the KV proof tests, as data: /metrics texts captured from real
// simulator runs (test/sim/capture_kv_metrics.py wrote test/phases/kv-metrics/),
// and a checked run directory for an engine narwhal did not prepare (a sim
// started by hand in a network namespace): launch.json with the fields a
// proof reads, checked.json binding its hash, container.env with the key.
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { parsePrometheus } from "../../src/phases/prometheus.js";
import { kvCountersFrom, type KvCounters } from "../../src/phases/kv-watch.js";
import { PLAN_SCHEMA } from "../../src/phases/plan.js";
import { sha256 } from "../../src/phases/prepare.js";
import type { ProofEnd } from "../../src/phases/kv-proof.js";

const METRICS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "kv-metrics");

/** One captured /metrics text. */
export function metricsText(name: string): string {
  return fs.readFileSync(path.join(METRICS_DIR, `${name}.txt`), "utf8");
}

/** The KV counters of one captured /metrics text, stamped `at`. */
export function capturedCounters(name: string, at = "2026-01-01T00:00:00.000Z"): KvCounters {
  return kvCountersFrom(parsePrometheus(metricsText(name)), at);
}

export interface RunDirOptions {
  engine: string;
  endpoint: string;
  servedName: string;
  sideChannelHost: string;
  sideChannelPort: number;
  node: string | null;
  apiKey?: string;
  blockSize?: number;
}

/** A checked run directory under `root` for an engine started outside narwhal; returns its ProofEnd. */
export async function checkedRunDir(root: string, o: RunDirOptions): Promise<ProofEnd> {
  const dir = path.join(root, o.engine, randomUUID().slice(0, 8));
  await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
  const launchToken = randomUUID();
  const plan = {
    schema: PLAN_SCHEMA,
    engine: o.engine,
    role: "prefill",
    launch_token: launchToken,
    endpoint: o.endpoint,
    command: ["--block-size", String(o.blockSize ?? 16)],
    environment: {
      VLLM_NIXL_SIDE_CHANNEL_HOST: o.sideChannelHost,
      VLLM_NIXL_SIDE_CHANNEL_PORT: String(o.sideChannelPort),
    },
    secret_environment: o.apiKey ? ["VLLM_API_KEY"] : [],
    ports: { nixl_side_channel: o.sideChannelPort },
    model: { served_name: o.servedName },
  };
  const bytes = Buffer.from(JSON.stringify(plan, null, 2));
  await fsp.writeFile(path.join(dir, "launch.json"), bytes, { mode: 0o400 });
  await fsp.writeFile(path.join(dir, "checked.json"), JSON.stringify({ plan_sha256: sha256(bytes) }), { mode: 0o600 });
  await fsp.writeFile(path.join(dir, "container.env"), o.apiKey ? `VLLM_API_KEY=${o.apiKey}\n` : "", { mode: 0o600 });
  return { engine: o.engine, run_dir: dir, launch_token: launchToken, node: o.node };
}
