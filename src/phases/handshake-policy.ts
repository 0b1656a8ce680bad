// handshake-policy (seed 001): inspect the installed NIXL worker against the
// checked connector settings and write the NIXL handshake compatibility
// inputs and hash. The inputs and hash are nixl-compat.ts's (vLLM's
// compute_nixl_compatibility_hash), fed with what the installed runtime
// reports, and must equal the nixl-compat.json check recorded: engines whose
// hash differs refuse each other's handshake and must not be paired.
import path from "node:path";
import { loadCheckedRun, refuseExisting } from "./checked-run.js";
import { NIXL_COMPAT_FILE, nixlCompatRecord, type NixlCompatRecord } from "./nixl-compat.js";
import { readJsonIfExists } from "../state/atomic-file.js";
import {
  HANDSHAKE_POLICY_FILE,
  inspectionEnvelope,
  inspectRuntime,
  writeRunOutput,
  type RuntimeInspectOptions,
} from "./runtime-inspect.js";
import { ActionError } from "./action-error.js";

interface HandshakeInspection {
  vllm_version: string;
  connector: {
    name: string;
    class: string;
    version: number | null;
    kv_role: string;
    kv_load_failure_policy: string;
    backends: string[];
  };
  nixl: { distribution: string | null; version: string | null; plugins: string[] };
  attention_backend: string;
  dimensions: {
    model_type: string | null;
    num_attention_heads: number;
    hidden_size: number;
    config_dtype: string | null;
    dtype: string;
    cache_dtype: string;
    num_kv_heads: number;
    head_size: number;
    num_hidden_layers: number;
    block_size: number;
    tensor_parallel_size: number;
  };
}

export async function handshakePolicy(
  dir: string,
  opts: RuntimeInspectOptions,
): Promise<{ file: string; content: Record<string, unknown> }> {
  const action = "handshake-policy";
  const loaded = await loadCheckedRun(action, dir);
  await refuseExisting(action, loaded, [HANDSHAKE_POLICY_FILE]);
  const { plan, checked } = loaded;
  const inspection = await inspectRuntime(action, loaded, "handshake-policy", opts);
  const found = inspection.result as unknown as HandshakeInspection;
  const problems: string[] = [];
  // The checked connector settings are the plan's; the installed worker must implement them.
  if (found.vllm_version !== checked.vllm_api_version)
    problems.push(
      `the runtime imports vLLM ${found.vllm_version}, but checked.json recorded ${checked.vllm_api_version}`,
    );
  if (found.connector.name !== plan.kv_transfer_config.kv_connector)
    problems.push(
      `the runtime resolves connector ${found.connector.name}, the plan configures ${String(plan.kv_transfer_config.kv_connector)}`,
    );
  if (found.connector.kv_role !== "kv_both")
    problems.push(`kv_role is ${found.connector.kv_role}; the fleet requires kv_both`);
  const d = found.dimensions;
  // The inputs as the installed worker would hash them: its vLLM and connector versions, the model's
  // dimensions as this runtime reads config.json, and the plan's flags (nixl-compat.ts resolves the rest).
  const compat = nixlCompatRecord(plan, loaded.run.plan_sha256, {
    vllm_version: found.vllm_version,
    connector_version: found.connector.version,
    model_architecture: {
      model_type: d.model_type,
      num_attention_heads: d.num_attention_heads,
      num_key_value_heads: d.num_kv_heads,
      head_dim: d.head_size,
      hidden_size: d.hidden_size,
      num_hidden_layers: d.num_hidden_layers,
      torch_dtype: d.config_dtype,
    },
  });
  const recorded = await readJsonIfExists<NixlCompatRecord>(path.join(loaded.run.dir, NIXL_COMPAT_FILE));
  if (recorded?.hash && compat.hash !== recorded.hash)
    problems.push(
      `the installed worker's NIXL compatibility hash is ${compat.hash}, but ${NIXL_COMPAT_FILE} (written by check) records ${recorded.hash}`,
    );
  if (problems.length) {
    throw new ActionError(action, problems.join("; "), {
      engine: plan.engine,
      run: loaded.run.dir,
      retryable: false,
      input: "kv_transfer_config",
      fix: "Repeat the check in a fresh prepared run; use a runtime whose NIXL connector implements the fleet's kv_both behaviour.",
    });
  }
  const content = {
    ...inspectionEnvelope("narwhal.handshake-policy/v1", loaded, inspection),
    compatibility: compat.inputs,
    compatibility_hash: compat.hash,
    attn_backend_source: compat.attn_backend_source,
    connector: found.connector,
    nixl: found.nixl,
    block_size: d.block_size,
    tensor_parallel_size: d.tensor_parallel_size,
    side_channel: {
      host: plan.environment.VLLM_NIXL_SIDE_CHANNEL_HOST,
      port: Number(plan.environment.VLLM_NIXL_SIDE_CHANNEL_PORT),
    },
    transport: { ucx_tls: plan.environment.UCX_TLS, ucx_net_devices: plan.environment.UCX_NET_DEVICES },
  };
  return { file: await writeRunOutput(action, loaded, HANDSHAKE_POLICY_FILE, content), content };
}
