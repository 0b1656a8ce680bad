// Container names and ownership labels per fleet (issue 14 item 5): a named fleet's
// containers carry its name in their name and labels, another fleet's are never
// this fleet's, and a container from before fleet names stays this fleet's (upgrade).
import { describe, expect, it } from "vitest";
import { LABEL, checkLabels, containerName, engineLabels, inFleet } from "../../src/backends/container-labels.js";
import { isKeptFailure, keptName } from "../../src/backends/container-failed.js";
import type { LaunchPlan } from "../../src/phases/plan.js";
import type { PreparedRun } from "../../src/phases/types.js";

const run: PreparedRun = {
  engine: "engine-1",
  dir: "/state/runs/engine-1/r1",
  input_hash: "h",
  plan_sha256: "p",
  launch_token: "t",
};
const plan = { input_hash: "h" } as Pick<LaunchPlan, "input_hash"> as LaunchPlan;
const ID = "0123456789abcdef".repeat(4);

describe("container names and labels per fleet", () => {
  it("names a named fleet's engine narwhal-<fleet>-<engine>, an unnamed one's narwhal-<engine> as before", () => {
    expect(containerName("prod-a", "engine-1")).toBe("narwhal-prod-a-engine-1");
    expect(containerName(undefined, "engine-1")).toBe("narwhal-engine-1");
    expect(keptName("prod-a", "engine-1", ID)).toBe("narwhal-prod-a-engine-1-failed-0123456789ab");
    expect(keptName(undefined, "engine-1", ID)).toBe("narwhal-engine-1-failed-0123456789ab");
    expect(isKeptFailure({ names: ["/narwhal-prod-a-engine-1-failed-0123456789ab"], state: "exited" })).toBe(true);
  });

  it("labels engine and check containers with the fleet only when it has a name", () => {
    expect(engineLabels(run, plan, "/state", "prod-a")).toMatchObject({
      [LABEL.state]: "/state",
      [LABEL.fleet]: "prod-a",
      [LABEL.purpose]: "engine",
    });
    expect(checkLabels(run, "/state", "tok", "prod-a")).toMatchObject({ [LABEL.fleet]: "prod-a" });
    expect(Object.keys(engineLabels(run, plan, "/state"))).not.toContain(LABEL.fleet);
    expect(Object.keys(checkLabels(run, "/state", "tok"))).not.toContain(LABEL.fleet);
  });

  it("owns its own fleet's containers and those from before fleet names, never another fleet's", () => {
    const mine = { name: "prod-a" };
    const unnamed = { name: undefined };
    expect(inFleet({ [LABEL.fleet]: "prod-a" }, mine)).toBe(true);
    expect(inFleet({}, mine)).toBe(true); // an upgrade adopts what runs
    expect(inFleet({ [LABEL.fleet]: "prod-b" }, mine)).toBe(false);
    expect(inFleet({}, unnamed)).toBe(true);
    expect(inFleet({ [LABEL.fleet]: "prod-b" }, unnamed)).toBe(false);
    // Not learned (a command without desired state): the state directory alone decides, as before.
    expect(inFleet({ [LABEL.fleet]: "prod-b" }, undefined)).toBe(true);
  });
});
