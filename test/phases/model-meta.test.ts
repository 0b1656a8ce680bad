// readModelMeta against the simulator's fixture checkpoints (test/sim/models)
// and a separate tokenizer directory: what decides --trust-remote-code and
// VLLM_SSM_CONV_STATE_LAYOUT=DS (seed 003 §16).
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isConvSsmConfig, readModelMeta } from "../../src/phases/model-meta.js";
import { LocalHost } from "../../src/hosts/local.js";

// The model directories are this machine's: read through the local host, as for a local node.
const host = new LocalHost("local-test", { PATH: "/usr/local/bin:/usr/bin:/bin" });

const models = fileURLToPath(new URL("../sim/models/", import.meta.url));
const model = (name: string) => path.join(models, name);

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), "narwhal-meta-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe("readModelMeta on the fixture checkpoints", () => {
  it("tiny-llama: no auto_map, not SSM", async () => {
    expect(await readModelMeta(host, model("tiny-llama"))).toEqual({
      auto_map: false,
      auto_map_sources: [],
      conv_ssm: false,
      model_type: "llama",
    });
  });

  it("tiny-remote-code: auto_map requires --trust-remote-code", async () => {
    const meta = await readModelMeta(host, model("tiny-remote-code"));
    expect(meta.auto_map).toBe(true);
    expect(meta.conv_ssm).toBe(false);
    expect(meta.model_type).toBe("tiny_remote");
  });

  it("tiny-mamba: convolutional SSM state", async () => {
    const meta = await readModelMeta(host, model("tiny-mamba"));
    expect(meta).toEqual({ auto_map: false, auto_map_sources: [], conv_ssm: true, model_type: "mamba2" });
  });

  it("a directory without config.json yields no requirements rather than throwing", async () => {
    const empty = path.join(tmp, "empty");
    await mkdir(empty);
    expect(await readModelMeta(host, empty)).toEqual({
      auto_map: false,
      auto_map_sources: [],
      conv_ssm: false,
      model_type: null,
    });
  });
});

describe("readModelMeta with a separate tokenizer", () => {
  it("finds auto_map in the tokenizer dir's tokenizer_config.json", async () => {
    const tok = path.join(tmp, "tok-remote");
    await mkdir(tok);
    await writeFile(
      path.join(tok, "tokenizer_config.json"),
      JSON.stringify({ auto_map: { AutoTokenizer: ["tok.Tok", null] } }),
    );
    const meta = await readModelMeta(host, model("tiny-llama"), tok);
    expect(meta.auto_map).toBe(true);
    expect(meta.model_type).toBe("llama");
  });

  it("a plain tokenizer dir leaves a plain model plain", async () => {
    const tok = path.join(tmp, "tok-plain");
    await mkdir(tok);
    await writeFile(path.join(tok, "tokenizer_config.json"), JSON.stringify({ tokenizer_class: "LlamaTokenizerFast" }));
    expect((await readModelMeta(host, model("tiny-llama"), tok)).auto_map).toBe(false);
  });

  it("an unparsable tokenizer_config.json is ignored, not fatal", async () => {
    const tok = path.join(tmp, "tok-broken");
    await mkdir(tok);
    await writeFile(path.join(tok, "tokenizer_config.json"), "{ not json");
    expect((await readModelMeta(host, model("tiny-llama"), tok)).auto_map).toBe(false);
  });

  it("reads the model config from --hf-config-path when given", async () => {
    const cfg = path.join(tmp, "hf-config");
    await mkdir(cfg);
    await writeFile(path.join(cfg, "config.json"), JSON.stringify({ model_type: "jamba", mamba_d_conv: 4 }));
    const meta = await readModelMeta(host, model("tiny-llama"), undefined, cfg);
    expect(meta).toEqual({ auto_map: false, auto_map_sources: [], conv_ssm: true, model_type: "jamba" });
  });
});

describe("isConvSsmConfig", () => {
  it("recognises SSM model types and conv-state keys", () => {
    expect(isConvSsmConfig({ model_type: "mamba" })).toBe(true);
    expect(isConvSsmConfig({ model_type: "nemotron_h" })).toBe(true);
    expect(isConvSsmConfig({ model_type: "custom_hybrid", conv_kernel: 4 })).toBe(true);
    expect(isConvSsmConfig({ model_type: "custom_hybrid", mamba_d_conv: 4 })).toBe(true);
  });

  it("leaves attention-only models alone", () => {
    expect(isConvSsmConfig({ model_type: "llama", num_key_value_heads: 8 })).toBe(false);
    expect(isConvSsmConfig({})).toBe(false);
    expect(isConvSsmConfig({ model_type: 42 })).toBe(false);
  });
});
