// Launch rules of seed 000 "Prepare, check, and start each engine" and seed
// 003 §15.1/§16, asserted on buildLaunchPlan's pure output.
import { describe, expect, it } from "vitest";
import {
  buildLaunchPlan,
  CONTAINER_MODEL_DIR,
  lastFlagValue,
  parseEnvFile,
  renderEnvFile,
  ucxTls,
} from "../../src/phases/plan.js";
import {
  API_KEY,
  engineSpec,
  IMAGE_ID,
  launchRecord,
  meta,
  MODEL_DIR,
  planInputs,
  withLaunch,
  withRuntime,
} from "./plan-fixtures.js";

/** The value following `flag` in argv (the plan writes `--flag V` pairs). */
function argAfter(argv: string[], flag: string): string | undefined {
  const i = argv.indexOf(flag);
  return i >= 0 ? argv[i + 1] : undefined;
}

describe("buildLaunchPlan: connector and transport", () => {
  it("configures NixlConnector kv_both over UCX with kv_load_failure_policy=fail", () => {
    const { plan } = buildLaunchPlan(planInputs());
    const json = argAfter(plan.command, "--kv-transfer-config");
    expect(json).toBeDefined();
    const cfg = JSON.parse(json!) as Record<string, unknown>;
    expect(cfg).toEqual({
      kv_connector: "NixlConnector",
      kv_role: "kv_both",
      kv_load_failure_policy: "fail",
      kv_connector_extra_config: { backends: ["UCX"] },
    });
    expect(plan.kv_transfer_config).toEqual(cfg);
  });

  it("advertises the side channel at the engine's host and port", () => {
    const spec = engineSpec({ nixl_host: "fd00::7", nixl_port: 5611 });
    const { plan, env } = buildLaunchPlan(planInputs({ spec }));
    expect(plan.environment.VLLM_NIXL_SIDE_CHANNEL_HOST).toBe("fd00::7");
    expect(plan.environment.VLLM_NIXL_SIDE_CHANNEL_PORT).toBe("5611");
    expect(env.VLLM_NIXL_SIDE_CHANNEL_PORT).toBe("5611");
    expect(plan.ports.nixl_side_channel).toBe(5611);
  });

  it("selects TCP or RDMA transports in UCX_TLS, with the accelerator's copy engine", () => {
    expect(ucxTls("ucx_tcp", "CUDA_VISIBLE_DEVICES").split(",")).toEqual(["tcp", "sm", "self", "cuda_copy"]);
    expect(ucxTls("ucx_tcp", "ROCR_VISIBLE_DEVICES").split(",")).toEqual(["tcp", "sm", "self", "rocm_copy"]);
    const rdma = ucxTls("ucx_rdma", "CUDA_VISIBLE_DEVICES").split(",");
    expect(rdma).toEqual(expect.arrayContaining(["rc", "cuda_copy"]));
    expect(rdma).not.toContain("tcp");
    const rdmaRocm = ucxTls("ucx_rdma", "ROCR_VISIBLE_DEVICES").split(",");
    expect(rdmaRocm).toContain("rocm_copy");
    expect(rdmaRocm).not.toContain("cuda_copy");
  });

  it("joins net_devices into UCX_NET_DEVICES and maps transfer devices", () => {
    const spec = withLaunch(engineSpec(), {
      transfer: { transport: "ucx_rdma", net_devices: ["mlx5_0:1", "mlx5_1:1"], devices: ["/dev/infiniband/uverbs0"] },
    });
    const { plan } = buildLaunchPlan(planInputs({ spec }));
    expect(plan.environment.UCX_NET_DEVICES).toBe("mlx5_0:1,mlx5_1:1");
    expect(plan.environment.UCX_TLS).toBe(ucxTls("ucx_rdma", "CUDA_VISIBLE_DEVICES"));
    expect(plan.devices).toEqual(["/dev/nvidia0", "/dev/nvidia1", "/dev/infiniband/uverbs0"]);
  });
});

describe("buildLaunchPlan: GPU allocation", () => {
  it("exports gpu_ids through the record's visibility variable and applies the TP size", () => {
    const { plan } = buildLaunchPlan(planInputs());
    expect(plan.environment.CUDA_VISIBLE_DEVICES).toBe("0,1");
    expect(plan.environment).not.toHaveProperty("ROCR_VISIBLE_DEVICES");
    expect(argAfter(plan.command, "--tensor-parallel-size")).toBe("2");
    expect(plan.gpu).toEqual({
      visibility_env: "CUDA_VISIBLE_DEVICES",
      ids: ["0", "1"],
      tensor_parallel_size: 2,
      accelerator: "NVIDIA H100 80GB HBM3",
    });
  });

  it("uses ROCR_VISIBLE_DEVICES for ROCm records", () => {
    const spec = withLaunch(engineSpec(), {
      accelerator: "AMD Instinct MI300X",
      gpu_ids: ["GPU-aa", "GPU-bb", "GPU-cc", "GPU-dd"],
      tensor_parallel_size: 4,
      gpu_visibility_env: "ROCR_VISIBLE_DEVICES",
      accelerator_devices: ["/dev/kfd", "/dev/dri/renderD128"],
    });
    const { plan } = buildLaunchPlan(planInputs({ spec }));
    expect(plan.environment.ROCR_VISIBLE_DEVICES).toBe("GPU-aa,GPU-bb,GPU-cc,GPU-dd");
    expect(plan.environment).not.toHaveProperty("CUDA_VISIBLE_DEVICES");
    expect(plan.environment.UCX_TLS).toContain("rocm_copy");
    expect(argAfter(plan.command, "--tensor-parallel-size")).toBe("4");
  });

  it("keeps derived settings when runtime.environment supplies the same names", () => {
    const spec = withRuntime(engineSpec(), {
      environment: { CUDA_VISIBLE_DEVICES: "7", UCX_TLS: "all", NCCL_DEBUG: "INFO" },
    });
    const { plan } = buildLaunchPlan(planInputs({ spec }));
    expect(plan.environment.CUDA_VISIBLE_DEVICES).toBe("0,1");
    expect(plan.environment.UCX_TLS).toBe("tcp,sm,self,cuda_copy");
    expect(plan.environment.NCCL_DEBUG).toBe("INFO");
  });
});

describe("buildLaunchPlan: serving arguments", () => {
  it("disables prefix caching and passes dtype, cache dtype, block size, host and port", () => {
    const { plan } = buildLaunchPlan(planInputs());
    expect(plan.command).toContain("--no-enable-prefix-caching");
    expect(plan.command).not.toContain("--enable-prefix-caching");
    expect(argAfter(plan.command, "--dtype")).toBe("bfloat16");
    expect(argAfter(plan.command, "--kv-cache-dtype")).toBe("auto");
    expect(argAfter(plan.command, "--block-size")).toBe("16");
    expect(argAfter(plan.command, "--host")).toBe("10.0.0.11");
    expect(argAfter(plan.command, "--port")).toBe("8000");
    expect(argAfter(plan.command, "--served-model-name")).toBe("tiny");
  });

  it("runs remote code only when the operator opts in with --trust-remote-code, whatever the metadata says", () => {
    const without = buildLaunchPlan(planInputs({ meta: meta({ auto_map: true }) })).plan;
    expect(without.command).not.toContain("--trust-remote-code");
    expect(without.model.trust_remote_code).toBe(false);
    const spec = withRuntime(engineSpec(), { extra_args: ["--trust_remote_code"] });
    const optIn = buildLaunchPlan(planInputs({ spec, meta: meta({ auto_map: true }) })).plan;
    expect(optIn.command.filter((a) => a === "--trust_remote_code")).toEqual(["--trust_remote_code"]);
    expect(optIn.command).not.toContain("--trust-remote-code");
    expect(optIn.model.trust_remote_code).toBe(true);
  });

  it("sets VLLM_SSM_CONV_STATE_LAYOUT=DS exactly for convolutional SSM models", () => {
    const plain = buildLaunchPlan(planInputs({ meta: meta({ conv_ssm: false }) }));
    expect(plain.plan.environment).not.toHaveProperty("VLLM_SSM_CONV_STATE_LAYOUT");
    expect(plain.env).not.toHaveProperty("VLLM_SSM_CONV_STATE_LAYOUT");
    const ssm = buildLaunchPlan(planInputs({ meta: meta({ conv_ssm: true, model_type: "mamba2" }) }));
    expect(ssm.plan.environment.VLLM_SSM_CONV_STATE_LAYOUT).toBe("DS");
    expect(ssm.env.VLLM_SSM_CONV_STATE_LAYOUT).toBe("DS");
    expect(ssm.plan.model.conv_ssm).toBe(true);
  });

  it("appends extra_args last, after every launcher-managed flag", () => {
    const extra = ["--max-model-len", "4096", "--gpu-memory-utilization=0.85", "--enforce-eager"];
    const spec = withRuntime(engineSpec(), { extra_args: extra });
    const { plan } = buildLaunchPlan(planInputs({ spec, meta: meta({ conv_ssm: true }) }));
    expect(plan.command.slice(-extra.length)).toEqual(extra);
    expect(plan.command.indexOf("--no-enable-prefix-caching")).toBeLessThan(plan.command.length - extra.length);
  });

  it("labels the plan with the launch token and the engine", () => {
    const { plan, env } = buildLaunchPlan(planInputs({ launchToken: "tok-xyz" }));
    expect(plan.launch_token).toBe("tok-xyz");
    expect(plan.environment.NARWHAL_LAUNCH_TOKEN).toBe("tok-xyz");
    expect(env.NARWHAL_ENGINE).toBe("engine-1");
  });
});

describe("buildLaunchPlan: the API key", () => {
  it("travels only in the returned env, never in the plan", () => {
    const { plan, env } = buildLaunchPlan(planInputs());
    expect(env.VLLM_API_KEY).toBe(API_KEY);
    expect(plan.environment).not.toHaveProperty("VLLM_API_KEY");
    expect(plan.secret_environment).toEqual(["VLLM_API_KEY"]);
    expect(plan.command).not.toContain("--api-key");
    const text = JSON.stringify(plan);
    expect(text).not.toContain(API_KEY);
    expect(JSON.stringify(plan, null, 2)).not.toContain(API_KEY);
  });

  it("is absent (and listed nowhere) when the engine has no key", () => {
    const { plan, env } = buildLaunchPlan(planInputs({ spec: engineSpec({ api_key: undefined }) }));
    expect(env).not.toHaveProperty("VLLM_API_KEY");
    expect(plan.secret_environment).toEqual([]);
  });
});

describe("buildLaunchPlan: backends and paths", () => {
  it("container: mounts the model dir read-only at /model and serves from there", () => {
    const { plan } = buildLaunchPlan(planInputs());
    expect(plan.backend).toBe("container");
    expect(plan.command[0]).toBe("python3");
    expect(argAfter(plan.command, "--model")).toBe(CONTAINER_MODEL_DIR);
    expect(plan.mounts).toEqual([{ source: MODEL_DIR, target: "/model", read_only: true }]);
    expect(plan.image).toEqual({ ref: "registry.local/vllm:0.11.0@sha256:" + "e".repeat(64), id: IMAGE_ID });
    expect(plan.check.model_dir).toBe("/model");
    expect(plan.check.tokenizer).toBe("/model");
    expect(plan.model.dir).toBe(MODEL_DIR);
  });

  it("container: maps a host --tokenizer inside the model dir to its /model path, in the command and the check", () => {
    const spec = withRuntime(engineSpec(), {
      extra_args: ["--tokenizer", `${MODEL_DIR}/tok`, "--max-model-len", "4096"],
    });
    const { plan } = buildLaunchPlan(planInputs({ spec }));
    expect(plan.check.tokenizer).toBe("/model/tok");
    expect(argAfter(plan.command, "--tokenizer")).toBe("/model/tok");
    expect(plan.command.join(" ")).not.toContain(MODEL_DIR);
  });

  it("container: maps --tokenizer=PATH and --hf-config-path too", () => {
    const spec = withRuntime(engineSpec(), {
      extra_args: [`--tokenizer=${MODEL_DIR}/tok`, "--hf-config-path", `${MODEL_DIR}/cfg`],
    });
    const { plan } = buildLaunchPlan(planInputs({ spec }));
    expect(plan.check.tokenizer).toBe("/model/tok");
    expect(plan.check.hf_config_path).toBe("/model/cfg");
    expect(plan.command).toContain("--tokenizer=/model/tok");
    expect(argAfter(plan.command, "--hf-config-path")).toBe("/model/cfg");
  });

  it("container: leaves image paths and sibling directories that merely share a prefix alone", () => {
    const spec = withRuntime(engineSpec(), { extra_args: ["--tokenizer", `${MODEL_DIR}2/tok`] });
    const { plan } = buildLaunchPlan(planInputs({ spec }));
    expect(plan.check.tokenizer).toBe(`${MODEL_DIR}2/tok`);
    const inImage = withRuntime(engineSpec(), { extra_args: ["--tokenizer", "/model/tok"] });
    expect(buildLaunchPlan(planInputs({ spec: inImage })).plan.check.tokenizer).toBe("/model/tok");
  });

  it("container: a GGUF file inside the model dir is served from /model", () => {
    const spec = engineSpec({
      model: {
        dir: MODEL_DIR,
        config_sha256: "c".repeat(64),
        served_name: "tiny",
        path: `${MODEL_DIR}/tiny.Q8_0.gguf`,
      },
    });
    const { plan } = buildLaunchPlan(planInputs({ spec }));
    expect(argAfter(plan.command, "--model")).toBe("/model/tiny.Q8_0.gguf");
    expect(plan.model.path).toBe("/model/tiny.Q8_0.gguf");
    expect(plan.check.model_dir).toBe("/model");
  });

  it("native: host paths, the configured interpreter, no mounts and no image", () => {
    const spec = withRuntime(engineSpec({ launch: launchRecord({ backend: "native", image: undefined }) }), {
      extra_args: ["--tokenizer", "/srv/tok"],
    });
    const { plan } = buildLaunchPlan(
      planInputs({ spec, inspection: { ...planInputs().inspection, image_id: "native:" + "9".repeat(64) } }),
    );
    expect(plan.backend).toBe("native");
    expect(plan.command[0]).toBe("/opt/venv/bin/python3");
    expect(plan.command.slice(1, 3)).toEqual(["-m", "vllm.entrypoints.openai.api_server"]);
    expect(argAfter(plan.command, "--model")).toBe(MODEL_DIR);
    expect(plan.mounts).toEqual([]);
    expect(plan.image).toBeNull();
    expect(plan.runtime_identity).toBe("native:" + "9".repeat(64));
    expect(plan.check.tokenizer).toBe("/srv/tok");
    expect(plan.check.model_dir).toBe(MODEL_DIR);
  });
});

describe("lastFlagValue", () => {
  it("reads `--x v` and `--x=v`", () => {
    expect(lastFlagValue(["--tokenizer", "/a"], "--tokenizer")).toBe("/a");
    expect(lastFlagValue(["--tokenizer=/b"], "--tokenizer")).toBe("/b");
    expect(lastFlagValue(["--tokenizer="], "--tokenizer")).toBe("");
  });

  it("returns the last of repeated flags, as argparse does", () => {
    expect(lastFlagValue(["--tokenizer", "/a", "--max-model-len", "8", "--tokenizer=/b"], "--tokenizer")).toBe("/b");
    expect(lastFlagValue(["--tokenizer=/b", "--tokenizer", "/c"], "--tokenizer")).toBe("/c");
  });

  it("ignores other flags that share a prefix, values that look like the flag, and a trailing flag", () => {
    expect(lastFlagValue(["--tokenizer-mode", "slow"], "--tokenizer")).toBeUndefined();
    expect(lastFlagValue(["--tokenizer-mode=slow"], "--tokenizer")).toBeUndefined();
    expect(lastFlagValue(["--served-model-name", "--tokenizer"], "--tokenizer")).toBeUndefined();
    expect(lastFlagValue(["--tokenizer", "/a", "--tokenizer"], "--tokenizer")).toBe("/a");
    expect(lastFlagValue([], "--tokenizer")).toBeUndefined();
  });
});

describe("container.env", () => {
  it("renders sorted KEY=VALUE lines that parse back to the same environment", () => {
    const env = { VLLM_API_KEY: API_KEY, A_URL: "http://h/?a=b=c", CUDA_VISIBLE_DEVICES: "0,1", EMPTY: "" };
    const text = renderEnvFile(env);
    expect(text.split("\n")).toEqual([
      "A_URL=http://h/?a=b=c",
      "CUDA_VISIBLE_DEVICES=0,1",
      "EMPTY=",
      `VLLM_API_KEY=${API_KEY}`,
      "",
    ]);
    expect(parseEnvFile(text)).toEqual(env);
  });

  it("round-trips a whole plan environment, secret included", () => {
    const { env } = buildLaunchPlan(planInputs());
    expect(parseEnvFile(renderEnvFile(env))).toEqual(env);
  });

  it("refuses a value with a newline instead of writing an extra variable", () => {
    expect(() => renderEnvFile({ NCCL_DEBUG: "WARN\nVLLM_API_KEY=stolen" })).toThrow(/NCCL_DEBUG/);
  });

  it("parses lines without '=' or with an empty name as nothing", () => {
    expect(parseEnvFile("junk\n=x\nA=1\n\n")).toEqual({ A: "1" });
  });
});
