// The launch plan, computed purely from the engine spec, what inspection saw
// and what the checkpoint metadata requires. prepare.ts writes it; nothing
// here touches the filesystem, so every launch rule is unit-testable.
import type { EngineSpec } from "../desired/types.js";
import type { Inspection } from "./types.js";
import type { ModelMeta } from "./model-meta.js";
import { optsIntoRemoteCode } from "../desired/remote-code.js";
import type { LauncherIdentity } from "../launcher.js";

export const PLAN_SCHEMA = "narwhal.launch/v1";
export const SECRET_ENV = ["VLLM_API_KEY"] as const;
export const CONTAINER_MODEL_DIR = "/model";

export interface AppIdentity {
  name: string;
  version: string;
  /** Git revision of the narwhal checkout, or "unknown". */
  revision: string;
  /** This narwhal's launcher digest and its parts: what the check compares a plan's with. */
  launcher: LauncherIdentity;
}

export interface LaunchPlan {
  schema: typeof PLAN_SCHEMA;
  engine: string;
  role: string;
  backend: EngineSpec["backend"];
  input_hash: string;
  launch_token: string;
  created_at: string;
  /** The narwhal that prepared the plan (its launcher digest is `launcher`, recorded once). */
  application: Omit<AppIdentity, "launcher">;
  /** The launcher digest and its parts the plan was made by (= the spec's: it is in the input hash). */
  launcher: LauncherIdentity;
  endpoint: string;
  /** The attestation sidecar's URL as prepared (NARWHAL_NODE_<n>_ATTESTATION_URL may override it at shared startup). */
  attestation_url: string;
  /** The node's GPU tools, for readings taken on this host after preparation (shared startup). */
  node: { name: string; nvidia_smi: string; rocminfo: string };
  image: { ref: string; id: string } | null;
  /** The node's Docker endpoint (DOCKER_HOST syntax) for the container backend; absent = default. */
  docker_host?: string;
  runtime_identity: string;
  group_signature: string;
  /** Full serving argv (no secrets: the API key travels in the run's engine.env / container.env). */
  command: string[];
  environment: Record<string, string>;
  secret_environment: string[];
  mounts: Array<{ source: string; target: string; read_only: boolean }>;
  devices: string[];
  network_mode: "host";
  gpu: { visibility_env: string; ids: string[]; tensor_parallel_size: number; accelerator: string };
  ports: { http: number; attestation: number; nixl_side_channel: number; transfer: number[] };
  model: {
    dir: string;
    path: string;
    config_sha256: string;
    /** sha256 of the GGUF file NARWHAL_MODEL_PATH selects (seed 001), null for a model directory. */
    file_sha256: string | null;
    served_name: string;
    revision: string | null;
    trust_remote_code: boolean;
    conv_ssm: boolean;
  };
  kv_transfer_config: Record<string, unknown>;
  /** What check_runtime.py needs, in the runtime's own paths. */
  check: {
    expected_packages: Record<string, string>;
    model_dir: string;
    tokenizer: string;
    hf_config_path: string | null;
  };
  launch_record: EngineSpec["launch"];
  inspection: Pick<
    Inspection,
    | "accelerator"
    | "physical_gpu_count"
    | "selected"
    | "model_config_sha256"
    | "model_tree_sha256"
    | "image_id"
    | "inspected_at"
  >;
}

export const KV_TRANSFER_CONFIG = {
  kv_connector: "NixlConnector",
  kv_role: "kv_both",
  kv_load_failure_policy: "fail",
  kv_connector_extra_config: { backends: ["UCX"] },
} as const;

/** UCX transports: TCP keeps to sockets; RDMA uses RC/UD verbs. Copy engines follow the accelerator. */
export function ucxTls(transport: EngineSpec["launch"]["transfer"]["transport"], visibility: string): string {
  const copy = visibility === "ROCR_VISIBLE_DEVICES" ? "rocm_copy" : "cuda_copy";
  return transport === "ucx_rdma" ? `rc,ud,sm,self,${copy}` : `tcp,sm,self,${copy}`;
}

/** Last value of a flag in an argv (`--flag V` or `--flag=V`), as argparse resolves repeats. */
export function lastFlagValue(args: string[], flag: string): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === flag && i + 1 < args.length) value = args[++i];
    else if (a.startsWith(`${flag}=`)) value = a.slice(flag.length + 1);
  }
  return value;
}

/** A host path as the engine's runtime sees it: the container mounts the model dir at CONTAINER_MODEL_DIR. */
export function inRuntime(
  spec: Pick<EngineSpec, "backend"> & { model: Pick<EngineSpec["model"], "dir"> },
  hostPath: string,
): string {
  if (spec.backend === "native") return hostPath;
  // Only the model dir itself or paths below it (a sibling "/models/m2" is not inside "/models/m").
  const dir = spec.model.dir.replace(/\/+$/, "");
  if (hostPath === dir) return CONTAINER_MODEL_DIR;
  return hostPath.startsWith(`${dir}/`) ? `${CONTAINER_MODEL_DIR}${hostPath.slice(dir.length)}` : hostPath;
}

/** extra_args flags whose value is a path the runtime opens (host paths under the model dir map to /model). */
const PATH_FLAGS = ["--tokenizer", "--hf-config-path"] as const;

/** extra_args in the runtime's own paths: `--tokenizer /host/model/dir/tok` → `--tokenizer /model/tok` in a container. */
function runtimeArgs(spec: EngineSpec, args: string[]): string[] {
  if (spec.backend === "native") return [...args];
  const out = [...args];
  for (let i = 0; i < out.length; i++) {
    const a = out[i]!;
    const flag = PATH_FLAGS.find((f) => a === f || a.startsWith(`${f}=`));
    if (!flag) continue;
    if (a === flag) {
      if (i + 1 < out.length) out[i + 1] = inRuntime(spec, out[++i]!);
    } else out[i] = `${flag}=${inRuntime(spec, a.slice(flag.length + 1))}`;
  }
  return out;
}

export interface PlanInputs {
  spec: EngineSpec;
  inspection: Inspection;
  meta: ModelMeta;
  app: AppIdentity;
  launchToken: string;
  createdAt: string;
  /** sha256 of the host file NARWHAL_MODEL_PATH names (GGUF), when set. */
  modelFileSha256?: string | null;
}

/** Build launch.json's content and the engine's full environment (secrets included, for the run's env file only: run-env.ts). */
export function buildLaunchPlan({ spec, inspection, meta, app, launchToken, createdAt, modelFileSha256 }: PlanInputs): {
  plan: LaunchPlan;
  env: Record<string, string>;
} {
  const launch = spec.launch;
  const modelPath = inRuntime(spec, spec.model.path ?? spec.model.dir);
  const modelDir = inRuntime(spec, spec.model.dir);
  const extra = runtimeArgs(spec, launch.runtime.extra_args);
  const tokenizer = lastFlagValue(extra, "--tokenizer") ?? modelDir;
  const hfConfig = lastFlagValue(extra, "--hf-config-path") ?? null;
  const command = [
    spec.backend === "native" ? spec.python : "python3",
    "-m",
    "vllm.entrypoints.openai.api_server",
    "--model",
    modelPath,
    "--served-model-name",
    spec.model.served_name,
    "--host",
    spec.host,
    "--port",
    String(spec.http_port),
    "--tensor-parallel-size",
    String(launch.tensor_parallel_size),
    "--dtype",
    launch.runtime.model_dtype,
    "--kv-cache-dtype",
    launch.runtime.kv_cache_dtype,
    "--block-size",
    String(launch.runtime.block_size),
    // Prefix caching off so the cache layout captured for profiling is the raw one.
    "--no-enable-prefix-caching",
    "--kv-transfer-config",
    JSON.stringify(KV_TRANSFER_CONFIG),
    // An engine sharing its GPU takes exactly its recorded fraction of device memory.
    ...(launch.shared_device ? ["--gpu-memory-utilization", launch.shared_device.gpu_memory_utilization] : []),
    ...extra,
  ];
  const environment: Record<string, string> = {
    ...launch.runtime.environment,
    [launch.gpu_visibility_env]: launch.gpu_ids.join(","),
    UCX_TLS: ucxTls(launch.transfer.transport, launch.gpu_visibility_env),
    UCX_NET_DEVICES: launch.transfer.net_devices.join(","),
    VLLM_NIXL_SIDE_CHANNEL_HOST: spec.nixl_host,
    VLLM_NIXL_SIDE_CHANNEL_PORT: String(spec.nixl_port),
    ...(meta.conv_ssm ? { VLLM_SSM_CONV_STATE_LAYOUT: "DS" } : {}),
    NARWHAL_ENGINE: spec.name,
    NARWHAL_LAUNCH_TOKEN: launchToken,
    // narwhal finds a native engine again by these variables in /proc/<pid>/environ of its group leader.
    // py-setproctitle (a vLLM dependency) writes a process title over that memory unless this is set, and
    // vLLM's API server process called it for a week of 2025 (6da007852..3146519ad); a plugin still may.
    // Set, the title only takes the command line's space, and the engine stays found (test/sim/README.md).
    SPT_NOENV: "1",
  };
  const env = { ...environment, ...(spec.api_key ? { VLLM_API_KEY: spec.api_key.reveal() } : {}) };
  const plan: LaunchPlan = {
    schema: PLAN_SCHEMA,
    engine: spec.name,
    role: spec.role,
    backend: spec.backend,
    input_hash: spec.input_hash,
    launch_token: launchToken,
    created_at: createdAt,
    application: { name: app.name, version: app.version, revision: app.revision },
    launcher: spec.launcher,
    endpoint: spec.url,
    attestation_url: spec.attestation_url,
    node: { name: spec.node.name, nvidia_smi: spec.node.nvidia_smi, rocminfo: spec.node.rocminfo },
    image: spec.backend === "container" ? { ref: launch.image ?? "", id: inspection.image_id } : null,
    ...(spec.backend === "container" && spec.node.docker_host ? { docker_host: spec.node.docker_host } : {}),
    runtime_identity: inspection.image_id,
    group_signature: inspection.group_signature,
    command,
    environment,
    secret_environment: spec.api_key ? [...SECRET_ENV] : [],
    mounts:
      spec.backend === "container" ? [{ source: spec.model.dir, target: CONTAINER_MODEL_DIR, read_only: true }] : [],
    devices: [...launch.accelerator_devices, ...launch.transfer.devices],
    network_mode: launch.network_mode,
    gpu: {
      visibility_env: launch.gpu_visibility_env,
      ids: launch.gpu_ids,
      tensor_parallel_size: launch.tensor_parallel_size,
      accelerator: launch.accelerator,
    },
    ports: {
      http: spec.http_port,
      attestation: spec.attestation_port,
      nixl_side_channel: spec.nixl_port,
      transfer: spec.transfer_ports,
    },
    model: {
      dir: spec.model.dir,
      path: modelPath,
      config_sha256: inspection.model_config_sha256,
      file_sha256: modelFileSha256 ?? null,
      served_name: spec.model.served_name,
      revision: spec.model.revision ?? null,
      // The operator's opt-in (remote-code.ts); inspection refused a plan where it and the auto_map disagree.
      trust_remote_code: optsIntoRemoteCode(extra),
      conv_ssm: meta.conv_ssm,
    },
    kv_transfer_config: { ...KV_TRANSFER_CONFIG },
    check: {
      expected_packages: launch.runtime.expected_packages,
      model_dir: modelDir,
      tokenizer,
      hf_config_path: hfConfig,
    },
    launch_record: launch,
    inspection: {
      accelerator: inspection.accelerator,
      physical_gpu_count: inspection.physical_gpu_count,
      selected: inspection.selected,
      model_config_sha256: inspection.model_config_sha256,
      // The whole checkpoint (model-manifest.json beside it): the plan's hash covers every file's digest.
      model_tree_sha256: inspection.model_tree_sha256,
      image_id: inspection.image_id,
      inspected_at: inspection.inspected_at,
    },
  };
  return { plan, env };
}

/** engine.env / container.env (run-env.ts): KEY=VALUE lines (values single-line; the launcher never writes newlines). */
export function renderEnvFile(env: Record<string, string>): string {
  // A newline would smuggle an extra KEY=VALUE line into the file (and past parseEnvFile); name the key, never the value.
  const multiline = Object.keys(env).filter((k) => /[\r\n]/.test(env[k]!) || /[=\r\n]/.test(k));
  if (multiline.length)
    throw new Error(
      `environment ${multiline.join(", ")} cannot be written to the engine's environment file: names must not contain '=' and values must be single-line`,
    );
  return (
    Object.keys(env)
      .sort()
      .map((k) => `${k}=${env[k]}`)
      .join("\n") + "\n"
  );
}

export function parseEnvFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const eq = line.indexOf("=");
    if (eq > 0) env[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return env;
}
