// NIXL compatibility inputs and hash against vLLM's own formula. vLLM
// (nixl_connector.py compute_nixl_compatibility_hash, config/utils.py hash_factors):
//
//   factors = {"vllm_version": vllm.__version__, "nixl_connector_version": NIXL_CONNECTOR_VERSION,
//              "model": model_config.model, "dtype": str(model_config.dtype),
//              "num_kv_heads": model_config.get_total_num_kv_heads(),
//              "head_size": model_config.get_head_size(),
//              "num_hidden_layers": model_config.get_total_num_hidden_layers(),
//              "attn_backend_name": attn_backend_name, "cache_dtype": str(cache_config.cache_dtype),
//              "cross_layers_blocks": cross_layers_blocks}
//   hash = hashlib.sha256(json.dumps(factors, sort_keys=True).encode()).hexdigest()
//
// The expected digests below were computed with exactly those two Python lines.
import { describe, expect, it } from "vitest";
import {
  attentionBackend,
  crossLayersBlocks,
  differingFactors,
  modelArchitecture,
  nixlCompatHash,
  nixlCompatRecord,
  torchDtype,
  type NixlCompatFactors,
} from "../../src/phases/nixl-compat.js";

const BASE: NixlCompatFactors = {
  vllm_version: "0.11.0",
  nixl_connector_version: 1,
  model: "/models/tiny-llama",
  dtype: "torch.bfloat16",
  num_kv_heads: 4,
  head_size: 64,
  num_hidden_layers: 2,
  attn_backend_name: "FLASH_ATTN",
  cache_dtype: "auto",
  cross_layers_blocks: false,
};

describe("nixlCompatHash is vLLM's hash_factors", () => {
  it.each([
    ["the base factors", BASE, "7466450ac446a1609e0159be8a55a00b3f4f4e4aea54487523df2b9091b8560a"],
    // Another mount path of the same checkpoint is another hash: vLLM hashes the --model string.
    [
      "another --model path",
      { ...BASE, model: "/srv/models/tiny-llama" },
      "4282a2191c7f67ca85711e39fa2cf94ee1e383c7513af6074c6fd0a228943e92",
    ],
    // json.dumps escapes non-ASCII (ensure_ascii) before hashing.
    [
      "a non-ASCII model path, fp8 cache",
      { ...BASE, model: "/models/モデル", cache_dtype: "fp8" },
      "5e51dc86ee59f9f4e3b5662ddda919f59efccc0c0870b66993cbff9ed37c7d1b",
    ],
  ])("%s", (_name, factors, expected) => {
    expect(nixlCompatHash(factors)).toBe(expected);
  });
});

describe("modelArchitecture follows ModelConfig", () => {
  it.each([
    // get_total_num_kv_heads: num_key_value_heads; get_head_size: head_dim.
    [
      "GQA with head_dim",
      { num_attention_heads: 4, num_key_value_heads: 2, head_dim: 64, hidden_size: 256, num_hidden_layers: 4 },
      [2, 64, 4, false],
    ],
    // No KV-head attribute: num_attention_heads; no head_dim: hidden_size // num_attention_heads.
    ["MHA without head_dim", { num_attention_heads: 12, hidden_size: 768, num_hidden_layers: 12 }, [12, 64, 12, false]],
    // Falcon multi_query without the new decoder architecture: one KV head.
    [
      "Falcon multi-query",
      { model_type: "falcon", multi_query: true, n_head: 71, hidden_size: 4544, num_hidden_layers: 32 },
      [1, 64, 32, false],
    ],
    // MLA (DeepSeek): one latent head of kv_lora_rank + qk_rope_head_dim.
    [
      "DeepSeek MLA",
      { num_attention_heads: 128, kv_lora_rank: 512, qk_rope_head_dim: 64, num_hidden_layers: 61 },
      [1, 576, 61, true],
    ],
    // A multimodal checkpoint: hf_text_config.
    [
      "text_config",
      { text_config: { num_attention_heads: 8, num_key_value_heads: 8, hidden_size: 1024, num_hidden_layers: 6 } },
      [8, 128, 6, false],
    ],
  ])("%s", (_name, config, [kv, head, layers, mla]) => {
    expect(modelArchitecture(config)).toEqual({ num_kv_heads: kv, head_size: head, num_hidden_layers: layers, mla });
  });

  it("is null when the config lacks the attention dimensions", () => {
    expect(modelArchitecture({ model_type: "mamba2", hidden_size: 256 })).toBeNull();
  });
});

describe("dtype and attention backend as vLLM resolves them", () => {
  it.each([
    ["bfloat16", "float16", "torch.bfloat16"],
    ["half", null, "torch.float16"],
    ["auto", "float16", "torch.float16"],
    // vLLM serves float32 checkpoints in the platform's first supported half type under "auto".
    ["auto", "float32", "torch.bfloat16"],
  ])("--dtype %s with config dtype %s is %s", (flag, config, expected) => {
    expect(torchDtype(flag, config)).toBe(expected);
  });

  it("takes the flag, then VLLM_ATTENTION_BACKEND, then the platform default, never auto", () => {
    expect(attentionBackend(["--attention-backend", "flashinfer"], {}, "nvidia", false)).toEqual({
      name: "FLASHINFER",
      source: "--attention-backend",
    });
    expect(
      attentionBackend(["--attention-backend=auto"], { VLLM_ATTENTION_BACKEND: "TRITON_ATTN" }, "nvidia", false),
    ).toEqual({ name: "TRITON_ATTN", source: "VLLM_ATTENTION_BACKEND" });
    expect(attentionBackend([], {}, "nvidia", false)).toEqual({ name: "FLASH_ATTN", source: "platform default" });
    expect(attentionBackend([], {}, "amd", true)).toEqual({ name: "TRITON_MLA", source: "platform default" });
  });

  it("uses cross-layer blocks only on FLASH_ATTN/FLASHINFER with the extra config's opt-in", () => {
    const optIn = { kv_connector_extra_config: { enable_cross_layers_blocks: "True" } };
    expect(crossLayersBlocks("FLASH_ATTN", false, optIn)).toBe(true);
    expect(crossLayersBlocks("TRITON_ATTN", false, optIn)).toBe(false);
    expect(crossLayersBlocks("FLASH_ATTN", false, {})).toBe(false);
  });
});

describe("nixlCompatRecord", () => {
  const plan = {
    engine: "prefill-0",
    command: [
      "python3",
      "-m",
      "vllm.entrypoints.openai.api_server",
      "--model",
      "/models/tiny-llama",
      "--served-model-name",
      "tiny",
      "--dtype",
      "bfloat16",
      "--kv-cache-dtype",
      "auto",
    ],
    environment: {},
    kv_transfer_config: { kv_connector: "NixlConnector" },
    gpu: { visibility_env: "CUDA_VISIBLE_DEVICES" },
  };
  const arch = {
    num_attention_heads: 4,
    num_key_value_heads: 4,
    head_dim: 64,
    num_hidden_layers: 2,
    torch_dtype: "bfloat16",
  };

  it("hashes the --model string, not the served name, with the checked versions", () => {
    const record = nixlCompatRecord(plan, "sha", {
      vllm_version: "0.11.0",
      connector_version: 1,
      model_architecture: arch,
    });
    expect(record.inputs).toEqual(BASE);
    expect(record.unknown).toEqual([]);
    expect(record.hash).toBe("7466450ac446a1609e0159be8a55a00b3f4f4e4aea54487523df2b9091b8560a");
  });

  it("has no hash, and names what is missing, when the runtime did not report an input", () => {
    const record = nixlCompatRecord(plan, "sha", {
      vllm_version: "0.11.0",
      connector_version: null,
      model_architecture: null,
    });
    expect(record.hash).toBeNull();
    expect(record.unknown).toEqual(["nixl_connector_version", "num_kv_heads", "head_size", "num_hidden_layers"]);
  });

  it("differingFactors compares known inputs only", () => {
    expect(differingFactors(BASE, { ...BASE, model: "/other", cache_dtype: undefined })).toEqual(["model"]);
  });
});
