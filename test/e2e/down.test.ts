// `narwhal down` stops everything the state directory owns: recorded engines,
// and an engine a killed controller started but never recorded.
import { describe, expect, it } from "vitest";
import { simFleet } from "./sim-fleet.js";
import { engineProcesses, runCli, status, teardown } from "./cli.js";
import { killAt } from "./campaign.js";

describe("narwhal down", () => {
  it("stops an engine whose start the state never recorded", async () => {
    const fleet = await simFleet();
    try {
      await killAt(fleet, { name: "native:spawn:after", hit: 2 });
      const procs = await engineProcesses(fleet.stateDir);
      expect(procs.length).toBe(2); // both spawned; at most one recorded
      const recorded = (await status(fleet.stateDir)).engines.filter((e) => e.pid !== null);
      expect(recorded.length).toBeLessThan(2);
      const r = await runCli(["down", "--state", fleet.stateDir, "--format", "json"]);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout).stopped.sort()).toEqual(["engine-1", "engine-2"]);
      expect(await engineProcesses(fleet.stateDir)).toEqual([]);
      for (const e of (await status(fleet.stateDir)).engines) expect(e.phase).toBe("stopped");
    } finally {
      await teardown(fleet.stateDir);
    }
  });
});
