// check refuses a plan made by another launcher (seed 000: "A changed launcher requires a new
// prepared run"): terminal, naming launch.json in the run dir, both digests, what differs, and the fix.
import path from "node:path";
import { describe, expect, it } from "vitest";
import { launcherRefusal } from "../../src/phases/check.js";
import { buildLaunchPlan, type LaunchPlan } from "../../src/phases/plan.js";
import { launcherIdentity } from "../../src/launcher.js";
import { LAUNCHER, planInputs } from "./plan-fixtures.js";

const RUN = "/state/runs/engine-1/20261201T000000Z-eeeeeeee";

describe("check: the plan's launcher", () => {
  const { plan } = buildLaunchPlan(planInputs());

  it("records the spec's launcher in launch.json and passes a plan this launcher made", () => {
    expect(plan.launcher).toEqual(LAUNCHER);
    expect(launcherRefusal("engine-1", RUN, plan, LAUNCHER)).toBeNull();
  });

  it("refuses a plan another launcher made, terminally, naming the run dir, both digests and the part that differs", () => {
    const running = launcherIdentity({ ...LAUNCHER, version: "0.2.0" });
    const err = launcherRefusal("engine-1", RUN, plan, running);
    expect(err).toMatchObject({ engine: "engine-1", step: "check", retryable: false });
    expect(err?.message).toBe(
      `${path.join(RUN, "launch.json")} was prepared by launcher ${LAUNCHER.digest}, but this narwhal's launcher is ${running.digest} (version 0.1.0 → 0.2.0)`,
    );
    expect(err?.fix).toMatch(/^A changed launcher requires a new prepared run: prepare a new run/);
  });

  it("refuses a plan that records no launcher (made before plans recorded one)", () => {
    const { launcher: _l, ...old } = plan;
    const err = launcherRefusal("engine-1", RUN, old as LaunchPlan, LAUNCHER);
    expect(err?.message).toMatch(/prepared by launcher \(none recorded\).*no launcher recorded/);
  });
});
