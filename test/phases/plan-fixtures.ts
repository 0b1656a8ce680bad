// Fixture builders for launch-plan tests: an engine spec, an inspection and
// model metadata as plain data. Tests start from a valid engine and change
// exactly the input the rule under test reads.
import { Secret, type EngineSpec, type LaunchRecord } from "../../src/desired/types.js";
import type { Inspection } from "../../src/phases/types.js";
import { MODEL_MANIFEST_SCHEMA } from "../../src/phases/host/model-manifest.js";
import type { ModelMeta } from "../../src/phases/model-meta.js";
import type { AppIdentity, PlanInputs } from "../../src/phases/plan.js";
import { validRuntime } from "../desired/fixtures.js";
import { launcherIdentity, PLAN_FORMAT } from "../../src/launcher.js";

export const API_KEY = "sk-narwhal-test-7f3a9c";
export const MODEL_DIR = "/host/model/dir";
export const CONFIG_SHA = "c".repeat(64);
/** A tree digest as plain data: plan tests never hash a directory. */
export const TREE_SHA = "7".repeat(64);
export const IMAGE_ID = "sha256:" + "d".repeat(64);
export const H100 = "NVIDIA H100 80GB HBM3";

export function launchRecord(over: Partial<LaunchRecord> = {}): LaunchRecord {
  return {
    role: "prefill",
    backend: "container",
    image: "registry.local/vllm:0.11.0@sha256:" + "e".repeat(64),
    accelerator: H100,
    gpu_ids: ["0", "1"],
    tensor_parallel_size: 2,
    gpu_visibility_env: "CUDA_VISIBLE_DEVICES",
    accelerator_devices: ["/dev/nvidia0", "/dev/nvidia1"],
    network_mode: "host",
    transfer: { transport: "ucx_tcp", net_devices: ["eth0"], devices: [] },
    runtime: validRuntime(),
    sources: {},
    ...over,
  };
}

/** A launcher identity built from fixed parts (the digest computed, not made up). */
export const LAUNCHER = launcherIdentity({
  version: "0.1.0",
  plan_format: PLAN_FORMAT,
  scripts: { "check_runtime.py": "f".repeat(64), "inspect_runtime.py": "d".repeat(64) },
});

export function engineSpec(over: Partial<EngineSpec> = {}): EngineSpec {
  const launch = over.launch ?? launchRecord(over.backend ? { backend: over.backend } : {});
  return {
    name: "engine-1",
    index: 1,
    iid: "n1",
    role: launch.role,
    node: {
      name: "node-1",
      sysfs_root: "/sys",
      nvidia_smi: "nvidia-smi",
      rocminfo: "rocminfo",
      dev_root: "/",
      work_dir: "/var/lib/narwhal/runs",
    },
    backend: launch.backend,
    url: "http://10.0.0.11:8000",
    attestation_url: "http://10.0.0.11:8010",
    host: "10.0.0.11",
    http_port: 8000,
    attestation_port: 8010,
    nixl_port: 5601,
    nixl_host: "10.0.0.11",
    transfer_ports: [],
    fabric_interface: "eth0",
    launch,
    model: { dir: MODEL_DIR, config_sha256: CONFIG_SHA, served_name: "tiny", revision: "r1" },
    python: "/opt/venv/bin/python3",
    api_key: new Secret(API_KEY),
    ready_seconds: 180,
    launcher: LAUNCHER,
    input_hash: "e".repeat(64),
    ...over,
  };
}

/** An engine's listeners on loopback at the given ports, as a spec spells them (inspection tests bind them for real). */
export function onLoopback(
  http: number,
  attestation: number,
  nixl: number,
): Pick<EngineSpec, "url" | "attestation_url" | "host" | "http_port" | "attestation_port" | "nixl_port" | "nixl_host"> {
  return {
    url: `http://127.0.0.1:${http}`,
    attestation_url: `http://127.0.0.1:${attestation}`,
    host: "127.0.0.1",
    http_port: http,
    attestation_port: attestation,
    nixl_port: nixl,
    nixl_host: "127.0.0.1",
  };
}

export function inspection(over: Partial<Inspection> = {}): Inspection {
  return {
    engine: "engine-1",
    node: "node-1",
    inspected_at: "2025-01-02T03:04:05.000Z",
    vendors: ["nvidia"],
    accelerator: H100,
    physical_gpu_count: 8,
    gpus: [
      { index: 0, name: H100, uuid: "GPU-0" },
      { index: 1, name: H100, uuid: "GPU-1" },
    ],
    selected: [
      { id: "0", index: 0, uuid: "GPU-0" },
      { id: "1", index: 1, uuid: "GPU-1" },
    ],
    devices: [],
    ports: [],
    model_config_sha256: CONFIG_SHA,
    model_meta: meta(),
    model_file_sha256: null,
    model_tree_sha256: TREE_SHA,
    model_manifest: {
      schema: MODEL_MANIFEST_SCHEMA,
      model_dir: MODEL_DIR,
      node: "node-1",
      tree_sha256: TREE_SHA,
      files: [{ path: "config.json", size: 2, sha256: CONFIG_SHA }],
      computed_at: "2025-01-02T03:04:05.000Z",
    },
    fabric: null,
    image_id: IMAGE_ID,
    group_signature: "0123456789abcdef",
    tool_output: "",
    ...over,
  };
}

export function meta(over: Partial<ModelMeta> = {}): ModelMeta {
  return { auto_map: false, conv_ssm: false, model_type: "llama", ...over };
}

export const APP: AppIdentity = {
  name: "narwhal",
  version: "0.1.0",
  revision: "abc123",
  launcher: LAUNCHER,
};

/** Everything buildLaunchPlan needs; override any part. */
export function planInputs(over: Partial<PlanInputs> = {}): PlanInputs {
  return {
    spec: engineSpec(),
    inspection: inspection(),
    meta: meta(),
    app: APP,
    launchToken: "tok-0001",
    createdAt: "2025-01-02T03:04:06.000Z",
    ...over,
  };
}

/** The spec with its launch record's runtime changed in place of a deep merge. */
export function withRuntime(spec: EngineSpec, runtime: Partial<LaunchRecord["runtime"]>): EngineSpec {
  return { ...spec, launch: { ...spec.launch, runtime: { ...spec.launch.runtime, ...runtime } } };
}

export function withLaunch(spec: EngineSpec, launch: Partial<LaunchRecord>): EngineSpec {
  const next = { ...spec.launch, ...launch };
  return { ...spec, launch: next, backend: next.backend, role: next.role };
}
