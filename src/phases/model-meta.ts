// What the checkpoint's own metadata says the launch needs (seed 003 §16):
// --trust-remote-code when the model or tokenizer config has an auto_map, and
// VLLM_SSM_CONV_STATE_LAYOUT=DS when the model carries convolutional SSM state.
import fs from "node:fs/promises";
import path from "node:path";

export interface ModelMeta {
  /** auto_map found in config.json or tokenizer_config.json (model or tokenizer dir). */
  auto_map: boolean;
  /** The model keeps convolutional SSM transfer state. */
  conv_ssm: boolean;
  model_type: string | null;
}

// Architectures whose layers keep a causal-conv state that NIXL transfers.
const CONV_SSM_MODEL_TYPES = new Set([
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
]);

export function isConvSsmConfig(config: Record<string, unknown>): boolean {
  const type = typeof config.model_type === "string" ? config.model_type : "";
  if (CONV_SSM_MODEL_TYPES.has(type)) return true;
  return ["conv_kernel", "mamba_d_conv", "ssm_state_size", "mamba_d_state"].some((k) => k in config);
}

async function readJson(file: string): Promise<Record<string, unknown> | null> {
  try {
    const parsed = JSON.parse(await fs.readFile(file, "utf8")) as unknown;
    return parsed && typeof parsed === "object" ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Read model (and separate tokenizer) metadata from host directories. */
export async function readModelMeta(
  modelDir: string,
  tokenizerDir?: string,
  hfConfigPath?: string,
): Promise<ModelMeta> {
  const configDir = hfConfigPath ?? modelDir;
  const config = (await readJson(path.join(configDir, "config.json"))) ?? {};
  const tokDirs = [...new Set([modelDir, tokenizerDir ?? modelDir])];
  const tokConfigs = await Promise.all(
    tokDirs.flatMap((d) => [readJson(path.join(d, "tokenizer_config.json")), readJson(path.join(d, "config.json"))]),
  );
  const autoMap = "auto_map" in config || tokConfigs.some((c) => c !== null && "auto_map" in c);
  return {
    auto_map: autoMap,
    conv_ssm: isConvSsmConfig(config),
    model_type: typeof config.model_type === "string" ? config.model_type : null,
  };
}
