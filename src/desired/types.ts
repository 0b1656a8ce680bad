// The resolved shape of one engine, as every phase sees it. The zod schemas in
// schemas.ts describe the files; this is what spec.ts builds from them after
// ${VAR} substitution, URL derivation and the cross-record rules passed.
import type { KvPolicy, RolloutPolicy } from "../controller/plan-types.js";
import type { LauncherIdentity } from "../launcher.js";
import type { Hardware } from "./schemas.js";
import type { NodeFileFacts } from "./node-files.js";

export type Backend = "native" | "container";
export type Transport = "ucx_tcp" | "ucx_rdma";
export type GpuVisibilityEnv = "CUDA_VISIBLE_DEVICES" | "ROCR_VISIBLE_DEVICES";

/** seed 003 §16: the runtime object of a launch record. */
export interface RuntimeRecord {
  /** Exact distribution versions, e.g. {"vllm": "0.11.0", "nixl": "0.6.1"}. */
  expected_packages: Record<string, string>;
  model_dtype: "bfloat16" | "float16";
  kv_cache_dtype: string;
  block_size: number;
  /** Image-local ROCm/CUDA, UCX, NIXL and library-path settings. */
  environment: Record<string, string>;
  /** Model-specific vLLM arguments (never launcher-managed flags). */
  extra_args: string[];
}

/** seed 003 §15.1 + §16: one launch record, after ${VAR} substitution. */
export interface LaunchRecord {
  role: string;
  backend: Backend;
  /** Container image reference or id (container backend). */
  image?: string;
  accelerator: string;
  gpu_ids: string[];
  tensor_parallel_size: number;
  gpu_visibility_env: GpuVisibilityEnv;
  accelerator_devices: string[];
  network_mode: "host";
  transfer: { transport: Transport; net_devices: string[]; devices: string[] };
  runtime: RuntimeRecord;
  /** Allocation, device and transfer definitions that produced the record. */
  sources: Record<string, string>;
  /** Two to eight engines share this one GPU within an allowance (narwhal engine start-shared). */
  shared_device?: { gpu_uuid: string; device_allowance: string; gpu_memory_utilization: string };
  /**
   * Derived by preparation (seed 003 §15.1): {<gpu_visibility_env>: gpu_ids joined
   * with ",", UCX_NET_DEVICES: net_devices joined}. spec.ts always fills it;
   * optional only so hand-built specs in tests need not repeat it.
   */
  environment?: Record<string, string>;
  /** Derived: ["--tensor-parallel-size", "<tp>"]. Filled by spec.ts like `environment`. */
  vllm_args?: string[];
}

/** Where and how host inspection runs for a node (overridable for tests and odd hosts). */
export interface NodeSpec {
  name: string;
  /** Root of the sysfs tree to scan for PCI devices; default "/sys". */
  sysfs_root: string;
  /** Path or name of nvidia-smi; default "nvidia-smi". */
  nvidia_smi: string;
  /** Path or name of rocminfo; default "rocminfo". */
  rocminfo: string;
  /** Directory under which accelerator/transfer device paths are checked; default "/". */
  dev_root: string;
  /** Docker endpoint for the container backend (DOCKER_HOST syntax); ssh://<destination> with ssh; undefined = default. */
  docker_host?: string;
  /** How the controller reaches the node; undefined = the controller's own host. Paths are absolute. */
  ssh?: { destination: string; port: number; identity_file?: string; known_hosts_file?: string };
  /** Absolute directory on the node holding per-run files; default "/var/lib/narwhal/runs". */
  work_dir: string;
}

/** The engine API key. Never serialised in clear: toJSON() prints a digest. */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toJSON(): string {
    return "<redacted>";
  }
  toString(): string {
    return "<redacted>";
  }
}

/** Everything one engine needs, resolved. Built by src/desired/spec.ts. */
export interface EngineSpec {
  /** "engine-<n>": key of desired/engine-launch.json. */
  name: string;
  /** fleet.json's `name`: scopes container names and labels (not hashed: naming a fleet restarts nothing). */
  fleet?: string;
  /** n, shared with fleet iid "n<n>" and NARWHAL_NODE_<n>_* variables. */
  index: number;
  iid: string;
  role: string;
  node: NodeSpec;
  backend: Backend;
  /** Engine HTTP URL (fleet record), e.g. http://127.0.0.1:18101 or http://[fd00::1]:8000. */
  url: string;
  attestation_url: string;
  /** Bind address for vLLM's --host (the URL's host, without brackets). */
  host: string;
  http_port: number;
  attestation_port: number;
  /** VLLM_NIXL_SIDE_CHANNEL_PORT: unique per engine per host. */
  nixl_port: number;
  /** VLLM_NIXL_SIDE_CHANNEL_HOST: the advertised address. */
  nixl_host: string;
  /** Transfer port(s) the fabric uses, if planned (checked free at inspect). */
  transfer_ports: number[];
  fabric_interface: string;
  launch: LaunchRecord;
  model: {
    /** Host directory mounted read-only at /model (container) or used directly (native). */
    dir: string;
    /** Expected sha256 of <dir>/config.json. */
    config_sha256: string;
    /**
     * NARWHAL_MODEL_TREE_SHA256: the tree digest the whole directory must have (model-manifest.json's
     * tree_sha256); absent when not pinned, so fleets without it keep their input hashes.
     */
    tree_sha256?: string;
    /** --served-model-name and the id /v1/models must list. */
    served_name: string;
    /** NARWHAL_MODEL_REVISION (required for native). */
    revision?: string;
    /** NARWHAL_MODEL_PATH: a local GGUF file inside the snapshot directory. */
    path?: string;
  };
  /** Python interpreter for the native backend (NARWHAL_NATIVE_PYTHON, default python3). */
  python: string;
  api_key?: Secret;
  /** Seconds allowed for readiness after start (NARWHAL_READY_SECONDS, default 180). */
  ready_seconds: number;
  /** The narwhal that prepares this engine (src/launcher.ts): hashed, so a new launcher re-prepares every engine. */
  launcher: LauncherIdentity;
  /**
   * NARWHAL_ENGINE_LAUNCHER_SHA256: the launcher digest the operator reviewed; prepare refuses any other.
   * Absent when unset. Not hashed: a gate before prepare, not a launch input (`launcher` is).
   */
  launcher_pin?: string;
  /** sha256 of the canonical JSON of everything above that can change the launch. */
  input_hash: string;
}

/** The result of loading desired/: either specs or every issue found. */
export interface DesiredState {
  dir: string;
  specs: EngineSpec[];
  /** fleet.json `rollout`, defaults applied (src/desired/rollout-policy.ts). */
  rollout: RolloutPolicy;
  /** fleet.json `kv_transfer`, defaults applied (src/desired/kv-policy.ts). */
  kv: KvPolicy;
  /** Fleet-level hardware expectations (seed 000). */
  hardware: Hardware;
  /** Values from deployment.env after derivation (secrets excluded). */
  variables: Record<string, string>;
  /** Secret values to redact from every log line. */
  secrets: string[];
  /** What this validation read (desired-key.ts): set by validateDesired, for state/desired-summary.json. */
  source?: DesiredSource;
}

/** The key of the texts a validation read, and the ssh files its nodes name as they were then. */
export interface DesiredSource {
  key: string;
  node_files: Array<[string, NodeFileFacts]>;
}
