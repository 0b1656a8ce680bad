// Launch-record rules of seed 001/003 beyond single fields: role-environment
// additions (NARWHAL_ENGINE_ARGS / NARWHAL_ENGINE_ENV), GGUF checkpoints,
// engines sharing a GPU, and ROCm device exposure. Each asserts file, JSON path
// and rule, like test/desired/rules.test.ts.
import { describe, expect, it } from "vitest";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { validateDesired } from "../../src/desired/load.js";
import type { ValidationIssue } from "../../src/errors.js";
import { buildLaunchPlan } from "../../src/phases/plan.js";
import { issuesOf, rec, runtime, validTree, writeTree } from "../desired/fixtures.js";
import { inspection, meta, planInputs } from "../phases/plan-fixtures.js";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const GPU = "GPU-4f1a7c2e-8b3d-4e6f-9a0b-1c2d3e4f5a6b";
const only = (issues: ValidationIssue[], rule: string) => issues.filter((i) => i.rule === rule);
const shared = (allowance: string, utilization: string) => ({
  gpu_uuid: GPU,
  device_allowance: allowance,
  gpu_memory_utilization: utilization,
});

describe("NARWHAL_ENGINE_ARGS and NARWHAL_ENGINE_ENV", () => {
  it("add to every engine's serving arguments and environment after the record's own", async () => {
    const tree = validTree();
    tree.env["NARWHAL_ENGINE_ARGS"] = '\'["--max-num-seqs", "64"]\'';
    tree.env["NARWHAL_ENGINE_ENV"] = '\'{"UCX_LOG_LEVEL": "info"}\'';
    const { state, issues } = await validateDesired(await writeTree(tree));
    expect(issues).toEqual([]);
    const spec = state!.specs[0]!;
    expect(spec.launch.runtime.extra_args).toEqual(["--max-model-len", "4096", "--max-num-seqs", "64"]);
    expect(spec.launch.runtime.environment).toMatchObject({ NCCL_DEBUG: "WARN", UCX_LOG_LEVEL: "info" });
  });

  it("keep derived settings: the launcher's DS layout and GPU visibility win over added environment", () => {
    const base = planInputs();
    const spec = {
      ...base.spec,
      launch: {
        ...base.spec.launch,
        runtime: { ...base.spec.launch.runtime, environment: { VLLM_SSM_CONV_STATE_LAYOUT: "SD" } },
      },
    };
    const { plan } = buildLaunchPlan({ ...base, spec, meta: meta({ conv_ssm: true }) });
    expect(plan.environment.VLLM_SSM_CONV_STATE_LAYOUT).toBe("DS");
    expect(plan.command).toContain("--tensor-parallel-size");
  });

  it("reject launcher-managed flags and variables, and unparsable values", async () => {
    const issues = await issuesOf((t) => {
      t.env["NARWHAL_ENGINE_ARGS"] = "'--port 9000 --max-num-seqs 8'";
      t.env["NARWHAL_ENGINE_ENV"] = "'CUDA_VISIBLE_DEVICES=3'";
    });
    const found = only(issues, "engine-args-env");
    expect(found).toContainEqual(
      expect.objectContaining({
        file: "deployment.env",
        path: "$.NARWHAL_ENGINE_ARGS",
        message: expect.stringMatching(/sets --port/),
      }),
    );
    expect(found).toContainEqual(
      expect.objectContaining({
        file: "deployment.env",
        path: "$.NARWHAL_ENGINE_ENV",
        message: expect.stringMatching(/sets CUDA_VISIBLE_DEVICES/),
      }),
    );
    const bad = await issuesOf((t) => {
      t.env["NARWHAL_ENGINE_ARGS"] = "'[1, 2]'";
    });
    expect(only(bad, "engine-args-env")[0]?.message).toMatch(/JSON array of strings/);
  });
});

describe("gguf-model", () => {
  const gguf = (t: ReturnType<typeof validTree>) => {
    t.env["NARWHAL_MODEL_PATH"] = "models/m/model.Q8_0.gguf";
    for (const k of [1, 2]) {
      runtime(t, k)["expected_packages"] = { vllm: "0.11.0", nixl: "0.6.1", "vllm-gguf-plugin": "0.1.0" };
      runtime(t, k)["extra_args"] = ["--tokenizer", "/base", "--hf-config-path", "/base"];
    }
  };

  it("accepts a GGUF file inside its snapshot with the plugin pinned and the base tokenizer and config", async () => {
    expect(await issuesOf(gguf)).toEqual([]);
  });

  it("names each missing piece", async () => {
    const issues = only(
      await issuesOf((t) => {
        gguf(t);
        t.env["NARWHAL_MODEL_PATH"] = "elsewhere/model.gguf";
        runtime(t, 1)["expected_packages"] = { vllm: "0.11.0", nixl: "0.6.1" };
        runtime(t, 2)["extra_args"] = ["--tokenizer", "/base"];
      }),
      "gguf-model",
    );
    expect(issues).toContainEqual(
      expect.objectContaining({
        file: "deployment.env",
        path: "$.NARWHAL_MODEL_PATH",
        message: expect.stringMatching(/not inside NARWHAL_MODEL_DIR/),
      }),
    );
    expect(issues).toContainEqual(
      expect.objectContaining({
        path: '$.engines["engine-1"].runtime.expected_packages',
        message: expect.stringMatching(/vllm-gguf-plugin/),
      }),
    );
    expect(issues).toContainEqual(
      expect.objectContaining({
        path: '$.engines["engine-2"].runtime.extra_args',
        message: expect.stringMatching(/--hf-config-path/),
      }),
    );
  });
});

describe("shared_device", () => {
  const sharing = (t: ReturnType<typeof validTree>) => {
    rec(t, 2)["gpu_ids"] = ["0"];
    rec(t, 2)["accelerator_devices"] = ["/dev/nvidia0"];
    rec(t, 1)["shared_device"] = shared("0.9", "0.45");
    rec(t, 2)["shared_device"] = shared("0.9", "0.45");
  };

  it("lets engines that declare the same GPU share it, and the launcher sets their memory fraction", async () => {
    const tree = validTree();
    sharing(tree);
    const { state, issues } = await validateDesired(await writeTree(tree));
    expect(issues).toEqual([]);
    const spec = state!.specs[1]!;
    const { plan } = buildLaunchPlan(planInputs({ spec, inspection: inspection({ engine: spec.name }) }));
    expect(plan.command.join(" ")).toContain("--gpu-memory-utilization 0.45");
  });

  it("still refuses a shared GPU id without the same shared_device", async () => {
    const issues = await issuesOf((t) => {
      sharing(t);
      rec(t, 2)["shared_device"] = shared("0.9", "0.45") as never;
      (rec(t, 2)["shared_device"] as Record<string, string>)["gpu_uuid"] = "GPU-other";
    });
    expect(only(issues, "gpu-ids-disjoint-per-host")).toHaveLength(1);
  });

  it("requires one GPU, the fraction in shared_device (not extra_args), and one allowance per GPU", async () => {
    const issues = await issuesOf((t) => {
      sharing(t);
      rec(t, 1)["gpu_ids"] = ["0", "1"];
      rec(t, 1)["tensor_parallel_size"] = 2;
      runtime(t, 1)["extra_args"] = ["--gpu-memory-utilization", "0.5"];
      rec(t, 2)["shared_device"] = shared("0.8", "0.45");
    });
    const rules = only(issues, "shared-device");
    expect(rules).toContainEqual(
      expect.objectContaining({
        path: '$.engines["engine-1"].gpu_ids',
        message: expect.stringMatching(/exactly one GPU/),
      }),
    );
    expect(rules).toContainEqual(
      expect.objectContaining({
        path: '$.engines["engine-1"].runtime.extra_args',
        message: expect.stringMatching(/set by the launcher from shared_device.gpu_memory_utilization/),
      }),
    );
    expect(only(issues, "shared-device-consistent")).toContainEqual(
      expect.objectContaining({ path: '$.engines["engine-2"].shared_device.device_allowance' }),
    );
  });

  it("takes allowances and fractions as decimals in (0, 1]", async () => {
    const issues = await issuesOf((t) => {
      sharing(t);
      rec(t, 1)["shared_device"] = { gpu_uuid: GPU, device_allowance: 1.5, gpu_memory_utilization: "1e-1" };
    });
    expect(
      issues
        .filter((i) => i.rule === "schema")
        .map((i) => i.path)
        .sort(),
    ).toEqual([
      '$.engines["engine-1"].shared_device.device_allowance',
      '$.engines["engine-1"].shared_device.gpu_memory_utilization',
    ]);
  });
});

describe("ROCm launch records", () => {
  it("the ROCm example exports ROCR_VISIBLE_DEVICES and maps /dev/kfd plus each selected GPU's render node", async () => {
    const { state, issues } = await validateDesired(path.join(REPO, "examples/rocm"));
    expect(issues).toEqual([]);
    for (const spec of state!.specs) {
      const { plan } = buildLaunchPlan(
        planInputs({ spec, inspection: inspection({ engine: spec.name, accelerator: "AMD Instinct MI300X" }) }),
      );
      expect(plan.environment.ROCR_VISIBLE_DEVICES).toBe(spec.launch.gpu_ids.join(","));
      expect(plan.environment.CUDA_VISIBLE_DEVICES).toBeUndefined();
      expect(plan.environment.UCX_TLS).toContain("rocm_copy");
      expect(plan.devices).toEqual(["/dev/kfd", `/dev/dri/renderD${128 + Number(spec.launch.gpu_ids[0])}`]);
    }
  });

  it("needs a render node per selected GPU", async () => {
    const issues = await issuesOf((t) => {
      const r = rec(t, 1);
      r["gpu_visibility_env"] = "ROCR_VISIBLE_DEVICES";
      r["gpu_ids"] = ["0", "1"];
      r["tensor_parallel_size"] = 2;
      r["accelerator_devices"] = ["/dev/kfd", "/dev/dri/renderD128"];
      rec(t, 2)["gpu_ids"] = ["2"];
    });
    expect(only(issues, "rocm-dri-per-gpu")).toEqual([
      expect.objectContaining({
        file: "engine-launch.json",
        path: '$.engines["engine-1"].accelerator_devices',
        message: expect.stringMatching(/2 selected GPU\(s\) but 1 DRI render node/),
      }),
    ]);
  });
});
