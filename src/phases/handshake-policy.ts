// handshake-policy (seed 001): inspect the installed NIXL worker against the
// checked connector settings and write the NIXL handshake compatibility
// inputs (DESIGN.md "vLLM facts": vLLM version, connector version, model,
// dtype, KV heads, head size, layers, attention backend, cache dtype).
// Engines whose compatibility hash differs must not be paired.
import { canonicalJson, sha256Hex } from "../desired/hash.js";
import { loadCheckedRun, refuseExisting } from "./checked-run.js";
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
  if (problems.length) {
    throw new ActionError(action, problems.join("; "), {
      engine: plan.engine,
      run: loaded.run.dir,
      retryable: false,
      input: "kv_transfer_config",
      fix: "Repeat the check in a fresh prepared run; use a runtime whose NIXL connector implements the fleet's kv_both behaviour.",
    });
  }
  const d = found.dimensions;
  // Served model name, not the --model path: paired engines mount the same checkpoint at different paths.
  const compatibility = {
    vllm_version: found.vllm_version,
    connector_version: found.connector.version,
    model: plan.model.served_name,
    dtype: d.dtype,
    num_kv_heads: d.num_kv_heads,
    head_size: d.head_size,
    num_layers: d.num_hidden_layers,
    attn_backend: found.attention_backend,
    cache_dtype: d.cache_dtype,
  };
  const content = {
    ...inspectionEnvelope("narwhal.handshake-policy/v1", loaded, inspection),
    compatibility,
    compatibility_hash: sha256Hex(canonicalJson(compatibility)),
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
