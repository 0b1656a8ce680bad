// What the checkpoint's own metadata says the launch needs (seed 003 §16): the
// auto_map that makes remote model code necessary (the operator opts in with
// --trust-remote-code, remote-code.ts), and VLLM_SSM_CONV_STATE_LAYOUT=DS when
// the model carries convolutional SSM state. Read on the engine's node, where the
// checkpoint the engine loads lives. MODEL_RULES is the one definition of both
// tests: check_runtime.py and inspect_runtime.py receive it in their input.
import path from "node:path";
import { DEFAULT_READ_MAX_BYTES, type HostAccess } from "../hosts/types.js";
import { fileErrno } from "./host/host-read.js";

export interface ModelMeta {
  /** auto_map found in config.json or tokenizer_config.json (model or tokenizer dir). */
  auto_map: boolean;
  /** The files that declare it, as read on the node. */
  auto_map_sources?: string[];
  /**
   * Metadata paths prepare could not read because they resolve inside a container image
   * (a --tokenizer or --hf-config-path outside the /model mount): the container check reads them.
   */
  in_image?: string[];
  /** The model keeps convolutional SSM transfer state. */
  conv_ssm: boolean;
  model_type: string | null;
}

/**
 * The rules the plan and both runtime scripts apply to a checkpoint's metadata. The scripts get
 * this object in their input (`model_rules`), so the lists live here only.
 */
export const MODEL_RULES = {
  /** Architectures whose layers keep a causal-conv state that NIXL transfers. */
  conv_ssm_model_types: [
    "mamba",
    "mamba2",
    "falcon_mamba",
    "falcon_h1",
    "jamba",
    "bamba",
    "nemotron_h",
    "zamba2",
    "granitemoehybrid",
    "plamo2",
    "lfm2",
    "qwen3_next",
    "minimax_text_01",
  ],
  /** config.json keys (present with a non-null value) that only a model with SSM / causal-conv state has. */
  conv_ssm_config_keys: [
    "conv_kernel",
    "mamba_d_conv",
    "linear_conv_kernel_dim",
    "conv_L_cache",
    "ssm_state_size",
    "mamba_d_state",
  ],
} as const;

/**
 * The auto_map test, the same in check_runtime.py's has_auto_map: the key is present AND its
 * value is non-empty: an object with an entry, or (the legacy tokenizer form) an array with one.
 * Absent, null, {}, [] and any other value (a string, a number) declare no custom code.
 */
export function hasAutoMap(config: Record<string, unknown>): boolean {
  const v = config.auto_map;
  if (Array.isArray(v)) return v.length > 0;
  return v !== null && typeof v === "object" && Object.keys(v).length > 0;
}

export function isConvSsmConfig(config: Record<string, unknown>): boolean {
  const type = typeof config.model_type === "string" ? config.model_type.toLowerCase() : "";
  if ((MODEL_RULES.conv_ssm_model_types as readonly string[]).includes(type)) return true;
  return MODEL_RULES.conv_ssm_config_keys.some((k) => config[k] !== undefined && config[k] !== null);
}

/** A missing or unparsable file is no metadata; a node that cannot be reached is an error (fileErrno rethrows it). */
async function readJson(
  host: HostAccess,
  file: string,
  known: ReadonlyMap<string, Buffer>,
): Promise<Record<string, unknown> | null> {
  let text: string;
  const bytes = known.get(file);
  // Read already (with a larger cap): what a read of its own would have refused is refused still.
  if (bytes !== undefined && bytes.length > DEFAULT_READ_MAX_BYTES) return null;
  try {
    text = (bytes ?? (await host.readFile(file))).toString("utf8");
  } catch (err) {
    fileErrno(err);
    return null;
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    return parsed && typeof parsed === "object" ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** --hf-config-path names a directory holding config.json or the JSON file itself, as check_runtime.py reads it. */
function configFile(dirOrFile: string): string {
  return dirOrFile.endsWith(".json") ? dirOrFile : path.posix.join(dirOrFile, "config.json");
}

/**
 * Read model (and separate tokenizer) metadata from directories on the engine's node. A tokenizer
 * or HF config path of null resolves inside a container image: it is not read here (in_image says so).
 */
export async function readModelMeta(
  host: HostAccess,
  modelDir: string,
  tokenizerDir?: string | null,
  hfConfigPath?: string | null,
  /** Files the caller has read on the node already (the model's config.json, for its digest). */
  known: ReadonlyMap<string, Buffer> = new Map(),
): Promise<ModelMeta> {
  const inImage = [
    ...(tokenizerDir === null ? ["--tokenizer"] : []),
    ...(hfConfigPath === null ? ["--hf-config-path"] : []),
  ];
  // The config the model is built from: --hf-config-path, else the model directory's (unread when in the image).
  const configPath = hfConfigPath === null ? undefined : configFile(hfConfigPath ?? modelDir);
  const config = (configPath === undefined ? null : await readJson(host, configPath, known)) ?? {};
  const tokDirs = [...new Set([modelDir, tokenizerDir ?? modelDir])];
  const files = tokDirs.flatMap((d) => ["tokenizer_config.json", "config.json"].map((n) => path.posix.join(d, n)));
  // One read at a time: each is a round trip on a remote node, and a node limits its concurrent sessions.
  const sources = configPath !== undefined && hasAutoMap(config) ? [configPath] : [];
  for (const file of new Set(files)) {
    if (file === configPath) continue;
    const data = await readJson(host, file, known);
    if (data && hasAutoMap(data)) sources.push(file);
  }
  return {
    auto_map: sources.length > 0,
    auto_map_sources: sources,
    ...(inImage.length ? { in_image: inImage } : {}),
    conv_ssm: isConvSsmConfig(config),
    model_type: typeof config.model_type === "string" ? config.model_type : null,
  };
}
