// What the checkpoint's own metadata says the launch needs (seed 003 §16):
// --trust-remote-code when the model or tokenizer config has an auto_map, and
// VLLM_SSM_CONV_STATE_LAYOUT=DS when the model carries convolutional SSM state.
// Read on the engine's node, where the checkpoint the engine loads lives.
import path from "node:path";
import type { HostAccess } from "../hosts/types.js";
import { fileErrno } from "./host/host-read.js";

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

/** A missing or unparsable file is no metadata; a node that cannot be reached is an error (fileErrno rethrows it). */
async function readJson(host: HostAccess, file: string): Promise<Record<string, unknown> | null> {
  let text: string;
  try {
    text = (await host.readFile(file)).toString("utf8");
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

/** Read model (and separate tokenizer) metadata from directories on the engine's node. */
export async function readModelMeta(
  host: HostAccess,
  modelDir: string,
  tokenizerDir?: string,
  hfConfigPath?: string,
): Promise<ModelMeta> {
  const configDir = hfConfigPath ?? modelDir;
  const config = (await readJson(host, path.posix.join(configDir, "config.json"))) ?? {};
  const tokDirs = [...new Set([modelDir, tokenizerDir ?? modelDir])];
  // One read at a time: each is a round trip on a remote node, and a node limits its concurrent sessions.
  const tokConfigs: Array<Record<string, unknown> | null> = [];
  for (const d of tokDirs)
    for (const name of ["tokenizer_config.json", "config.json"])
      tokConfigs.push(await readJson(host, path.posix.join(d, name)));
  const autoMap = "auto_map" in config || tokConfigs.some((c) => c !== null && "auto_map" in c);
  return {
    auto_map: autoMap,
    conv_ssm: isConvSsmConfig(config),
    model_type: typeof config.model_type === "string" ? config.model_type : null,
  };
}
