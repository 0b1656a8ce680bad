// start-shared's checks before launch, as pure data: the same group, GPU UUID
// and allowance, unique roles and ports, and an exact decimal budget.
import { describe, expect, it } from "vitest";
import { buildLaunchPlan, type LaunchPlan } from "../../src/phases/plan.js";
import { sharedBudget, type SharedPlan } from "../../src/phases/shared-budget.js";
import { engineSpec, launchRecord, planInputs } from "../phases/plan-fixtures.js";

const GPU = "GPU-4f1a7c2e-8b3d-4e6f-9a0b-1c2d3e4f5a6b";

function member(
  k: number,
  utilization: string,
  over: {
    allowance?: string;
    uuid?: string;
    role?: string;
    port?: number;
    backend?: "native" | "container";
    gpus?: string[];
  } = {},
): SharedPlan {
  const gpus = over.gpus ?? ["0"];
  const launch = launchRecord({
    role: over.role ?? `role${k}`,
    backend: over.backend ?? "native",
    gpu_ids: gpus,
    tensor_parallel_size: gpus.length,
    shared_device: {
      gpu_uuid: over.uuid ?? GPU,
      device_allowance: over.allowance ?? "0.3",
      gpu_memory_utilization: utilization,
    },
  });
  const port = over.port ?? 8000 + k;
  const spec = engineSpec({
    name: `engine-${k}`,
    index: k,
    launch,
    backend: launch.backend,
    role: launch.role,
    http_port: port,
    attestation_port: 9000 + k,
    nixl_port: 5600 + k,
  });
  const { plan } = buildLaunchPlan(planInputs({ spec }));
  return { dir: `/runs/e${k}`, plan };
}

const problems = (members: SharedPlan[], backend: LaunchPlan["backend"] = "native") =>
  sharedBudget(members, backend).problems.join("\n");

describe("sharedBudget", () => {
  it("passes 0.1 + 0.2 against an allowance of 0.3 (exact decimal sum)", () => {
    const { budget, problems: p } = sharedBudget([member(1, "0.1"), member(2, "0.2")], "native");
    expect(p).toEqual([]);
    expect(budget).toEqual({
      gpu_uuid: GPU,
      device_allowance: "0.3",
      group_signature: "0123456789abcdef",
      sum: "0.3",
      utilizations: [
        { engine: "engine-1", gpu_memory_utilization: "0.1" },
        { engine: "engine-2", gpu_memory_utilization: "0.2" },
      ],
    });
  });

  it("refuses an allowance exceeded by 0.01", () => {
    expect(problems([member(1, "0.1"), member(2, "0.21")])).toMatch(
      /0\.1 \+ 0\.21 = 0\.31 exceeds shared_device\.device_allowance 0\.3/,
    );
  });

  it("takes two to eight plans", () => {
    expect(problems([member(1, "0.1")])).toMatch(/2 to 8 plans, got 1/);
    expect(problems(Array.from({ length: 9 }, (_, i) => member(i + 1, "0.01")))).toMatch(/2 to 8 plans, got 9/);
  });

  it("requires one GPU UUID, one allowance (compared as decimals), one group and the selected backend", () => {
    expect(problems([member(1, "0.1"), member(2, "0.1", { uuid: "GPU-other" })])).toMatch(/shares GPU GPU-other/);
    expect(problems([member(1, "0.1"), member(2, "0.1", { allowance: "0.30" })])).toBe("");
    expect(problems([member(1, "0.1"), member(2, "0.1", { allowance: "0.4" })])).toMatch(/share one allowance/);
    const other = member(2, "0.1");
    other.plan = { ...other.plan, group_signature: "fedcba9876543210" };
    expect(problems([member(1, "0.1"), other])).toMatch(/shared plans share their group/);
    expect(problems([member(1, "0.1"), member(2, "0.1")], "container")).toMatch(
      /requires every selected plan to use that backend/,
    );
  });

  it("requires unique roles, ports, engines and run directories", () => {
    expect(problems([member(1, "0.1", { role: "decode" }), member(2, "0.1", { role: "decode" })])).toMatch(
      /roles must be unique: engine-2 and engine-1 both use decode/,
    );
    expect(problems([member(1, "0.1", { port: 8000 }), member(2, "0.1", { port: 8000 })])).toMatch(
      /ports must be unique: .*port 8000/,
    );
    const twice = member(1, "0.1");
    expect(problems([twice, twice])).toMatch(/same run directory is selected twice/);
  });

  it("requires a shared_device block on every plan and one GPU each", () => {
    const plain = member(2, "0.1");
    plain.plan = { ...plain.plan, launch_record: { ...plain.plan.launch_record, shared_device: undefined } };
    expect(problems([member(1, "0.1"), plain])).toMatch(/engine-2 has no shared_device block/);
    expect(problems([member(1, "0.1"), member(2, "0.1", { gpus: ["0", "1"] })])).toMatch(/selects 2 GPUs/);
  });
});
