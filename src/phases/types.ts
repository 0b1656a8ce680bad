// Data that flows between the steps of the engine procedure. Every phase
// returns plain JSON-serialisable data so the engine machine can persist it.
import type { ModelMeta } from "./model-meta.js";
import type { ModelManifest } from "./host/model-manifest.js";

/** One GPU as the host's tool reports it. */
export interface ObservedGpu {
  /** Position in the tool's output (0-based), the index gpu_ids may name. */
  index: number;
  /** PCI bus id (nvidia-smi) when known. */
  bus_id?: string;
  /** Product name (nvidia-smi `name`, rocminfo `Marketing Name`). */
  name: string;
  /** GPU UUID (nvidia-smi `uuid`, rocminfo `Uuid`) when known. */
  uuid?: string;
}

/** The transfer fabric as the engine's node shows it (`ip -j address show dev IF`, /sys/class/infiniband). */
export interface FabricObservation {
  /** NARWHAL_FABRIC_INTERFACE. */
  interface: string;
  present: boolean;
  /** ip's operstate ("UP", "DOWN", "UNKNOWN" for loopback), when the interface was read. */
  operstate?: string;
  /** Local addresses on the interface. */
  addresses: string[];
  /** The engine's advertised address (NARWHAL_NODE_<n>_IP) is one of them; null when it is no IP literal or was not read. */
  carries_node_ip: boolean | null;
  /** RDMA only: each HCA (and port) of transfer.net_devices, looked for under node.sysfs_root. */
  hcas: Array<{ name: string; port?: string; checked: string; present: boolean }>;
}

/** What `inspect` observed on the engine's host (seed 000, "Inspect every engine host"). */
export interface Inspection {
  engine: string;
  node: string;
  inspected_at: string;
  /** Vendors found by the PCI scan (classes 0x03*, 0x12*). */
  vendors: Array<"nvidia" | "amd">;
  /** Accelerator product observed (all selected GPUs share it). */
  accelerator: string;
  /** Physical GPU count visible on the host. */
  physical_gpu_count: number;
  gpus: ObservedGpu[];
  /** The launch record's gpu_ids, each resolved to an observed GPU. */
  selected: Array<{ id: string; index: number; uuid?: string }>;
  devices: Array<{ path: string; present: boolean }>;
  ports: Array<{ port: number; purpose: string; free: boolean }>;
  /** sha256 of <model dir>/config.json as read now. */
  model_config_sha256: string;
  /** What the checkpoint's metadata (on the node) says the launch needs; prepare builds the plan from it. */
  model_meta: ModelMeta;
  /** sha256 of the GGUF file NARWHAL_MODEL_PATH names, computed on the node; null for a model directory. */
  model_file_sha256: string | null;
  /** Tree digest of the whole model directory (model_manifest.tree_sha256), computed on the node. */
  model_tree_sha256: string;
  /** The complete manifest (seed 000's private discovery record): prepare writes it as model-manifest.json. */
  model_manifest: ModelManifest;
  /** null when the engine names no fabric interface. */
  fabric: FabricObservation | null;
  /** Container image id, or the native runtime identity ("native:<sha256>"). */
  image_id: string;
  /** seed 000 cache-equivalence group signature (16 hex). */
  group_signature: string;
  /** Raw tool output retained as evidence (nvidia-smi CSV, rocminfo text). */
  tool_output: string;
}

/** A prepared, immutable run directory (state/runs/<engine>/<stamp>-<hash8>/). */
export interface PreparedRun {
  engine: string;
  dir: string;
  input_hash: string;
  /** sha256 of launch.json's bytes. */
  plan_sha256: string;
  /** Random token that labels whatever this run starts (container label / process env). */
  launch_token: string;
}

/** checked.json (seed 000 "Validate the image and plan"). */
export interface CheckResult {
  plan_sha256: string;
  vllm_api_version: string;
  image_id: string;
  inspection_id: string;
  checked_at: string;
  packages: Record<string, string>;
  connector: Record<string, unknown>;
  tokenizer: Record<string, unknown>;
  trust_remote_code: boolean;
  ssm_conv_state_layout: string | null;
  /** The NIXL compatibility hash of nixl-compat.json (null: an input unknown; absent in runs checked before it was recorded). */
  nixl_compat_hash?: string | null;
}

/** A running engine's identity: what lets narwhal find it again after a crash. */
export type EngineHandle =
  | {
      kind: "native";
      pid: number;
      pgid: number;
      boot_id: string;
      start_ticks: number;
      launch_token: string;
      /** The node it runs on (fleet.json node name); absent in records from before nodes were reached over ssh: the local host. */
      node?: string;
    }
  | {
      kind: "container";
      container_id: string;
      launch_token: string;
      /** Docker endpoint it runs on; undefined = default. */ docker_host?: string;
    };

/** probed.json: the live process the probes proved. */
export interface ProbeResult {
  probed_at: string;
  version: string;
  models: string[];
  process_start_time_seconds: number;
  completion_text: string;
  /** Files the captures were written to (fresh names if earlier attempts exist). */
  files: Record<string, string>;
}

/** cache-layout.json essentials, compared within a signature group. */
export interface CacheLayout {
  captured_at: string;
  engine: string;
  group_signature: string;
  block_size: number;
  num_gpu_blocks: number;
  gpu_kv_cache_tokens: number;
  cache_dtype: string;
  tensor_parallel_size: number;
  max_concurrency?: { tokens_per_request: number; factor: number };
  /** The attestation sidecar the capture step started and probed (absent: the run predates sidecars). */
  attestation?: { url: string; sidecar_pid: number; node: string; checked_at: string };
}
