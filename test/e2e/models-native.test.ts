// Launch rules that depend on the checkpoint and the runtime, proved against
// the simulator: custom code (the operator's opt-in), convolutional SSM state, TP ranks, and the
// runtime check's refusals (which write no checked.json).
import { describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleetOptions } from "./sim-fleet.js";
import { runCli, status, teardown } from "./cli.js";

async function converge(opts: SimFleetOptions) {
  const fleet = await simFleet(opts);
  const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
  const [engine] = (await status(fleet.stateDir)).engines;
  return { fleet, r, engine: engine! };
}

describe("checkpoint-driven launch rules", () => {
  it("serves a checkpoint with auto_map when the operator opts in with --trust-remote-code", async () => {
    const { fleet, r, engine } = await converge({
      model: "tiny-remote-code",
      engines: [{ extraArgs: ["--trust-remote-code"] }],
    });
    try {
      expect(r.code, r.stderr).toBe(0);
      const plan = JSON.parse(await fs.readFile(path.join(engine.run_dir!, "launch.json"), "utf8"));
      expect(plan.command.filter((a: string) => a === "--trust-remote-code")).toHaveLength(1);
      const checked = JSON.parse(await fs.readFile(path.join(engine.run_dir!, "checked.json"), "utf8"));
      expect(checked.trust_remote_code).toBe(true);
    } finally {
      await teardown(fleet.stateDir);
    }
  });

  it("refuses a checkpoint with auto_map without the opt-in: inspect fails naming runtime.extra_args, nothing prepared or started", async () => {
    const { fleet, r, engine } = await converge({ model: "tiny-remote-code", engines: [{}] });
    try {
      expect(r.code).toBe(2);
      expect(engine.phase).toBe("failed");
      expect(engine.last_error).toMatchObject({ step: "inspect", input: "runtime.extra_args", retryable: false });
      expect(engine.last_error!.message).toMatch(/declare\(s\) an auto_map.*does not opt in with --trust-remote-code/);
      expect(engine.last_error!.fix).toMatch(/add "--trust-remote-code" to engine-1's runtime.extra_args/);
      expect(engine.run_dir ?? null).toBeNull();
    } finally {
      await teardown(fleet.stateDir);
    }
  });

  it("sets VLLM_SSM_CONV_STATE_LAYOUT=DS for a convolutional SSM checkpoint", async () => {
    const { fleet, r, engine } = await converge({ model: "tiny-mamba", engines: [{}] });
    try {
      expect(r.code, r.stderr).toBe(0);
      const plan = JSON.parse(await fs.readFile(path.join(engine.run_dir!, "launch.json"), "utf8"));
      expect(plan.environment.VLLM_SSM_CONV_STATE_LAYOUT).toBe("DS");
      const checked = JSON.parse(await fs.readFile(path.join(engine.run_dir!, "checked.json"), "utf8"));
      expect(checked.ssm_conv_state_layout).toBe("DS");
    } finally {
      await teardown(fleet.stateDir);
    }
  });

  it("captures a TP 2 engine only once every rank reported", async () => {
    const { fleet, r, engine } = await converge({ engines: [{ gpus: ["0", "1"] }] });
    try {
      expect(r.code, r.stderr).toBe(0);
      expect(engine.layout!.tensor_parallel_size).toBe(2);
      const plan = JSON.parse(await fs.readFile(path.join(engine.run_dir!, "launch.json"), "utf8"));
      expect(plan.environment.CUDA_VISIBLE_DEVICES).toBe("0,1");
      expect(plan.command.join(" ")).toContain("--tensor-parallel-size 2");
    } finally {
      await teardown(fleet.stateDir);
    }
  });
});

describe("the runtime check refuses and writes no checked.json", () => {
  const cases: Array<{ name: string; opts: SimFleetOptions; cause: RegExp }> = [
    { name: "a tokenizer that fails to load", opts: { engines: [{ faults: "tokenizer_error" }] }, cause: /tokenizer/ },
    {
      name: "a convolutional SSM checkpoint on a runtime that does not know VLLM_SSM_CONV_STATE_LAYOUT",
      opts: { model: "tiny-mamba", engines: [{ faults: "no_ssm_layout" }] },
      cause: /VLLM_SSM_CONV_STATE_LAYOUT/,
    },
    {
      name: "a package pin the runtime does not have",
      opts: { engines: [{ expectedPackages: { vllm: "0.10.2", nixl: "0.6.1" } }] },
      cause: /vllm.*0\.10\.2.*0\.11\.0|vllm.*0\.11\.0.*0\.10\.2/,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const { fleet, r, engine } = await converge(c.opts);
      try {
        expect(r.code).toBe(2);
        expect(engine.phase).toBe("failed");
        expect(engine.last_error!.step).toBe("check");
        expect(engine.last_error!.message).toMatch(c.cause);
        const files = await fs.readdir(engine.run_dir!);
        expect(files).not.toContain("checked.json");
        expect(await fs.readFile(path.join(engine.run_dir!, "runtime-check.log"), "utf8")).toMatch(
          /=== inspection [0-9a-f-]{36} plan_sha256=[0-9a-f]{64}/,
        );
      } finally {
        await teardown(fleet.stateDir);
      }
    });
  }
});
