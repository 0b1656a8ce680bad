// Fixture builders: valid desired trees as plain data, written to fresh temp
// directories. Tests start from a valid tree and break exactly one thing.

import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { validateDesired } from "../../src/desired/load.js";
import type { ValidationIssue } from "../../src/errors.js";

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type Obj = { [k: string]: Json };

export interface DesiredTree {
  env: Record<string, string>;
  fleet: Obj;
  launch: Obj;
}

export const SHA = "a".repeat(64);

export function validEnv(): Record<string, string> {
  return {
    NARWHAL_FABRIC_INTERFACE: "eth0",
    NARWHAL_ENGINE_PORT: "8000",
    NARWHAL_ATTEST_PORT: "8010",
    NARWHAL_NODE_1_IP: "10.0.0.11",
    NARWHAL_NODE_2_IP: "10.0.0.11",
    NARWHAL_NODE_2_ENGINE_PORT: "8001",
    NARWHAL_NODE_2_ATTEST_PORT: "8011",
    NARWHAL_NODE_2_NIXL_PORT: "5601",
    NARWHAL_MODEL_DIR: "models/m",
    NARWHAL_MODEL_CONFIG_SHA256: SHA,
    NARWHAL_ENGINE_MODEL_NAME: "m",
    NARWHAL_MODEL_REVISION: "r1",
    NARWHAL_ENGINE_API_KEY: "k-123",
  };
}

/** A valid seed 003 §16 runtime object (shared by the plan fixtures). */
export function validRuntime() {
  return {
    expected_packages: { vllm: "0.11.0", nixl: "0.6.1" },
    model_dtype: "bfloat16" as const,
    kv_cache_dtype: "auto",
    block_size: 16,
    environment: { NCCL_DEBUG: "WARN" },
    extra_args: ["--max-model-len", "4096"],
  };
}

export function validRecord(role: string, gpus: string[]): Obj {
  return {
    role,
    backend: "container",
    image: "sha256:" + "b".repeat(64),
    accelerator: "NVIDIA H100 80GB HBM3",
    gpu_ids: gpus,
    tensor_parallel_size: gpus.length,
    gpu_visibility_env: "CUDA_VISIBLE_DEVICES",
    accelerator_devices: gpus.map((g) => `/dev/nvidia${g}`),
    network_mode: "host",
    transfer: { transport: "ucx_tcp", net_devices: ["${NARWHAL_FABRIC_INTERFACE}"], devices: [] },
    sources: {},
    runtime: validRuntime(),
  };
}

/** Two engines (prefill n1 on GPU 0, decode n2 on GPU 1) on one host. */
export function validTree(): DesiredTree {
  return {
    env: validEnv(),
    fleet: {
      engines: [1, 2].map((k) => ({
        iid: `n${k}`,
        url: `\${NARWHAL_NODE_${k}_URL}`,
        attestation_url: `\${NARWHAL_NODE_${k}_ATTESTATION_URL}`,
        role: k === 1 ? "prefill" : "decode",
      })),
      nodes: [{ name: "gpu-a", engines: ["n1", "n2"] }],
      hardware: { accelerator: "NVIDIA H100 80GB HBM3", accelerators_per_engine: 1, tensor_parallel: 1 },
    },
    launch: { engines: { "engine-1": validRecord("prefill", ["0"]), "engine-2": validRecord("decode", ["1"]) } },
  };
}

export const envText = (vars: Record<string, string>) =>
  Object.entries(vars)
    .map(([k, v]) => `${k}=${v}`)
    .join("\n") + "\n";

/** Write a tree (or raw file texts) into a fresh temp directory. */
export async function writeTree(
  tree: DesiredTree,
  raw: Partial<Record<"env" | "fleet" | "launch", string | Buffer>> = {},
): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "narwhal-desired-"));
  await writeFile(join(dir, "deployment.env"), raw.env ?? envText(tree.env));
  await writeFile(join(dir, "fleet.json"), raw.fleet ?? JSON.stringify(tree.fleet, null, 2));
  await writeFile(join(dir, "engine-launch.json"), raw.launch ?? JSON.stringify(tree.launch, null, 2));
  return dir;
}

/** Issues of a tree modified by `edit`. */
export async function issuesOf(
  edit: (t: DesiredTree) => void,
  raw?: Parameters<typeof writeTree>[1],
): Promise<ValidationIssue[]> {
  const tree = validTree();
  edit(tree);
  return (await validateDesired(await writeTree(tree, raw))).issues;
}

/** Shorthand for deep edits in tests. */
export const rec = (t: DesiredTree, k: number) => (t.launch["engines"] as Obj)[`engine-${k}`] as Obj;
export const runtime = (t: DesiredTree, k: number) => rec(t, k)["runtime"] as Obj;
export const fleetEngine = (t: DesiredTree, i: number) => (t.fleet["engines"] as Obj[])[i] as Obj;
