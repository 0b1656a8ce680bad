// nixl-compat: the NIXL compatibility inputs and hash exactly as vLLM's
// NixlConnector computes them at its side-channel handshake
// (nixl_connector.py compute_nixl_compatibility_hash, hashed with
// vllm/config/utils.py hash_factors = sha256(json.dumps(factors, sort_keys=True))).
// A decode whose hash differs from its prefill's refuses the handshake, so
// narwhal computes the same value before start and never pairs such engines.
// Pure: the check step and the desired-state rules feed it what they know.
import { pythonJsonDumps, sha256Hex } from "../desired/hash.js";
import { lastFlagValue } from "./plan.js";

export const NIXL_COMPAT_FILE = "nixl-compat.json";
export const NIXL_COMPAT_SCHEMA = "narwhal.nixl-compat/v1";

/** vLLM's factors dict, field for field (the hash sorts keys, so order here is for reading only). */
export interface NixlCompatFactors {
  vllm_version: string;
  nixl_connector_version: number;
  /** model_config.model: the --model string as given, not the served name. */
  model: string;
  /** str(model_config.dtype), e.g. "torch.bfloat16". */
  dtype: string;
  num_kv_heads: number;
  head_size: number;
  num_hidden_layers: number;
  /** The resolved backend's name (FLASH_ATTN, ...), never "auto". */
  attn_backend_name: string;
  /** str(cache_config.cache_dtype): the --kv-cache-dtype string, "auto" included. */
  cache_dtype: string;
  cross_layers_blocks: boolean;
}

export interface ModelArchitecture {
  num_kv_heads: number;
  head_size: number;
  num_hidden_layers: number;
  /** DeepSeek-style multi-head latent attention: one latent KV head. */
  mla: boolean;
}

const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** vLLM reads the text config of a multimodal checkpoint (hf_text_config). */
export function textConfig(config: Record<string, unknown>): Record<string, unknown> {
  const text = config.text_config;
  return text && typeof text === "object" && !Array.isArray(text) ? (text as Record<string, unknown>) : config;
}

/**
 * ModelConfig.get_total_num_kv_heads / get_head_size / get_total_num_hidden_layers for
 * the architectures narwhal serves: MLA (kv_lora_rank), Falcon's multi_query, the
 * generic attribute list, else num_attention_heads. null when the config lacks them.
 */
export function modelArchitecture(config: Record<string, unknown>, mlaDisabled = false): ModelArchitecture | null {
  const c = textConfig(config);
  const heads = num(c.num_attention_heads) ?? num(c.n_head);
  const layers = num(c.num_hidden_layers) ?? num(c.n_layer) ?? num(c.num_layers);
  const kvLoraRank = num(c.kv_lora_rank);
  const mla = kvLoraRank !== undefined && !mlaDisabled;
  if (heads === undefined || layers === undefined) return null;
  if (mla)
    return { num_kv_heads: 1, head_size: kvLoraRank + (num(c.qk_rope_head_dim) ?? 0), num_hidden_layers: layers, mla };
  const falcon = ["falcon", "RefinedWeb", "RefinedWebModel"].includes(String(c.model_type));
  let kvHeads: number | undefined;
  if (falcon && c.new_decoder_architecture !== true && c.multi_query === true) kvHeads = 1;
  for (const attr of ["n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"])
    kvHeads ??= num(c[attr]);
  const hidden = num(c.hidden_size) ?? num(c.n_embd);
  const headSize = num(c.head_dim) || (hidden !== undefined ? Math.floor(hidden / heads) : undefined);
  if (headSize === undefined) return null;
  return { num_kv_heads: kvHeads ?? heads, head_size: headSize, num_hidden_layers: layers, mla };
}

/** str(torch.dtype) for vLLM's --dtype choices; "auto" takes the checkpoint's, float32 checkpoints served as bfloat16. */
export function torchDtype(flag: string, configDtype: unknown): string {
  const names: Record<string, string> = {
    half: "float16",
    float16: "float16",
    bfloat16: "bfloat16",
    float: "float32",
    float32: "float32",
  };
  if (flag !== "auto") return `torch.${names[flag] ?? flag}`;
  const fromConfig = typeof configDtype === "string" ? configDtype.replace(/^torch\./, "") : "float32";
  return `torch.${fromConfig === "float32" ? "bfloat16" : (names[fromConfig] ?? fromConfig)}`;
}

export interface AttentionBackend {
  name: string;
  /** Where the name came from: narwhal cannot run vLLM's platform selector without the GPU. */
  source: "--attention-backend" | "VLLM_ATTENTION_BACKEND" | "platform default";
}

/**
 * The backend vLLM resolves: the serve flag, else VLLM_ATTENTION_BACKEND, else the
 * platform's default for the attention kind (CUDA: FLASH_ATTN, FLASHMLA for MLA;
 * ROCm: TRITON_ATTN, TRITON_MLA). The default is an assumption recorded as such.
 */
export function attentionBackend(
  command: string[],
  environment: Record<string, string>,
  vendor: "nvidia" | "amd",
  mla: boolean,
): AttentionBackend {
  const flag = lastFlagValue(command, "--attention-backend");
  if (flag && flag.toLowerCase() !== "auto") return { name: flag.toUpperCase(), source: "--attention-backend" };
  const env = environment.VLLM_ATTENTION_BACKEND;
  if (env) return { name: env.toUpperCase(), source: "VLLM_ATTENTION_BACKEND" };
  const name = vendor === "amd" ? (mla ? "TRITON_MLA" : "TRITON_ATTN") : mla ? "FLASHMLA" : "FLASH_ATTN";
  return { name, source: "platform default" };
}

/** NixlConnector.prefer_cross_layer_blocks: FLASH_ATTN/FLASHINFER, HND layout (not MLA), and the extra config's opt-in. */
export function crossLayersBlocks(
  attnBackend: string,
  mla: boolean,
  kvTransferConfig: Record<string, unknown>,
): boolean {
  if (!["FLASH_ATTN", "FLASHINFER"].includes(attnBackend) || mla) return false;
  const extra = kvTransferConfig.kv_connector_extra_config;
  const optIn =
    extra && typeof extra === "object" ? (extra as Record<string, unknown>).enable_cross_layers_blocks : undefined;
  return String(optIn ?? "False").toLowerCase() === "true";
}

/** hash_factors(factors): sha256 of Python's json.dumps(factors, sort_keys=True). */
export function nixlCompatHash(factors: NixlCompatFactors): string {
  return sha256Hex(pythonJsonDumps(factors, { sortKeys: true }));
}

/** The factors that differ between two engines' inputs (known values only: undefined is unknown). */
export function differingFactors(
  a: Partial<NixlCompatFactors>,
  b: Partial<NixlCompatFactors>,
): Array<keyof NixlCompatFactors> {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)] as Array<keyof NixlCompatFactors>);
  return [...keys].filter((k) => a[k] !== undefined && b[k] !== undefined && a[k] !== b[k]).sort();
}

/** What the runtime check reported that the inputs need (check_runtime.py's result). */
export interface CheckedCompatFacts {
  vllm_version: string | null;
  connector_version: number | null;
  /** config.json's architecture fields as the runtime read them; null when unreadable. */
  model_architecture: Record<string, unknown> | null;
}

/** nixl-compat.json: the inputs, the hash (null when an input is unknown), and how each guess was made. */
export interface NixlCompatRecord {
  schema: typeof NIXL_COMPAT_SCHEMA;
  engine: string;
  plan_sha256: string;
  inputs: Partial<NixlCompatFactors>;
  /** Inputs the runtime did not report: no hash, and the planner cannot prove the pair. */
  unknown: Array<keyof NixlCompatFactors>;
  hash: string | null;
  attn_backend_source: AttentionBackend["source"];
}

/** The plan-side view nixlCompatRecord needs (a LaunchPlan has it all). */
export interface CompatPlanView {
  engine: string;
  command: string[];
  environment: Record<string, string>;
  kv_transfer_config: Record<string, unknown>;
  gpu: { visibility_env: string };
}

/** Compute one engine's record from its plan and its checked runtime. */
export function nixlCompatRecord(plan: CompatPlanView, planSha: string, facts: CheckedCompatFacts): NixlCompatRecord {
  const vendor = plan.gpu.visibility_env === "CUDA_VISIBLE_DEVICES" ? "nvidia" : "amd";
  const mlaDisabled = ["1", "true"].includes((plan.environment.VLLM_MLA_DISABLE ?? "").toLowerCase());
  const arch = facts.model_architecture ? modelArchitecture(facts.model_architecture, mlaDisabled) : null;
  const backend = attentionBackend(plan.command, plan.environment, vendor, arch?.mla ?? false);
  const dtypeFlag = lastFlagValue(plan.command, "--dtype") ?? "auto";
  const inputs: Partial<NixlCompatFactors> = {
    vllm_version: facts.vllm_version ?? undefined,
    nixl_connector_version: facts.connector_version ?? undefined,
    model: lastFlagValue(plan.command, "--model"),
    dtype:
      dtypeFlag === "auto" && !facts.model_architecture
        ? undefined
        : torchDtype(dtypeFlag, facts.model_architecture?.torch_dtype ?? facts.model_architecture?.dtype),
    num_kv_heads: arch?.num_kv_heads,
    head_size: arch?.head_size,
    num_hidden_layers: arch?.num_hidden_layers,
    attn_backend_name: backend.name,
    cache_dtype: lastFlagValue(plan.command, "--kv-cache-dtype") ?? "auto",
    cross_layers_blocks: crossLayersBlocks(backend.name, arch?.mla ?? false, plan.kv_transfer_config),
  };
  const unknown = (Object.keys(inputs) as Array<keyof NixlCompatFactors>).filter((k) => inputs[k] === undefined);
  return {
    schema: NIXL_COMPAT_SCHEMA,
    engine: plan.engine,
    plan_sha256: planSha,
    inputs,
    unknown,
    hash: unknown.length ? null : nixlCompatHash(inputs as NixlCompatFactors),
    attn_backend_source: backend.source,
  };
}

/**
 * Why vLLM's handshake refuses a decode of TP `decodeTp` reading from a prefill of TP `prefillTp`
 * (null: it accepts). The hash leaves TP out on purpose; NixlConnectorWorker.add_remote_agent
 * (vLLM 0.11, the version the simulator emulates) then computes tp_ratio = divide(decode TP,
 * prefill TP), which asserts divisibility: each prefill rank's heads are split across tp_ratio
 * decode ranks, so the decode's TP must be a multiple of the prefill's (equal included), and a
 * prefill of larger TP than its decode is refused (later vLLM releases added that direction).
 */
export function tpRatioRefusal(prefillTp: number, decodeTp: number): string | null {
  if (decodeTp % prefillTp === 0) return null;
  return decodeTp < prefillTp
    ? `vLLM's NIXL handshake refuses a decode of smaller TP than its prefill (decode TP ${decodeTp} < prefill TP ${prefillTp}: AssertionError ${decodeTp} is not divisible by ${prefillTp})`
    : `vLLM's NIXL handshake needs the decode's TP to be a multiple of the prefill's (decode TP ${decodeTp}, prefill TP ${prefillTp}: AssertionError ${decodeTp} is not divisible by ${prefillTp})`;
}
