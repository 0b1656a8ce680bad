// A container found by its launch token is this plan's engine only if its Cmd
// and Env are the plan's (Docker merges the image's ENV under the create Env).
import { describe, expect, it } from "vitest";
import { containerPlanProblems, planEnv } from "../../src/backends/container-plan.js";

const plan = {
  command: ["python3", "-m", "vllm.entrypoints.openai.api_server", "--port", "8000"],
  environment: { CUDA_VISIBLE_DEVICES: "0", UCX_TLS: "tcp" },
};
const ENTRYPOINT = ["/bin/sh", "-c", 'exec "$@"', "narwhal-engine"];
const expected = { entrypoint: ENTRYPOINT, imageEnv: ["PATH=/usr/local/bin:/usr/bin", "UCX_TLS=rc"] };
// What Docker reports for a container created from the plan: image ENV, overridden by the create Env.
const created = {
  Entrypoint: ENTRYPOINT,
  Cmd: [...plan.command],
  Env: ["PATH=/usr/local/bin:/usr/bin", "UCX_TLS=tcp", "CUDA_VISIBLE_DEVICES=0"],
};

describe("containerPlanProblems", () => {
  it("accepts the container created from the plan", () => {
    expect(planEnv(plan)).toEqual(["CUDA_VISIBLE_DEVICES=0", "UCX_TLS=tcp"]);
    expect(containerPlanProblems(created, expected, plan)).toEqual([]);
  });

  it("names a wrapped command", () => {
    const problems = containerPlanProblems(
      { ...created, Cmd: ["/bin/sh", "-c", 'touch /x; exec "$@"', "sh", ...plan.command] },
      expected,
      plan,
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^its command \["\/bin\/sh",.* is not the plan's \["python3"/);
  });

  it("names a replaced entrypoint", () => {
    expect(
      containerPlanProblems({ ...created, Entrypoint: ["/bin/sh", "-c", 'touch /x; exec "$@"', "sh"] }, expected, plan),
    ).toEqual(['its entrypoint ["/bin/sh","-c","touch /x; exec \\"$@\\"","sh"] is not narwhal\'s']);
    expect(containerPlanProblems({ ...created, Entrypoint: null }, expected, plan)).toEqual([
      "its entrypoint [] is not narwhal's",
    ]);
  });

  it("names added, changed and missing variables, never their values", () => {
    const problems = containerPlanProblems(
      { ...created, Env: ["PATH=/usr/local/bin:/usr/bin", "UCX_TLS=rc", "LD_PRELOAD=/tmp/evil-secret.so"] },
      expected,
      plan,
    );
    expect(problems).toEqual([
      "its environment differs from the plan's (and the image's) in CUDA_VISIBLE_DEVICES, LD_PRELOAD, UCX_TLS",
    ]);
    expect(problems.join()).not.toContain("evil-secret");
  });
});
