// The reconciler starts engines that share one GPU through the start-shared
// path: together, in sequence, with the budget checked against real readings
// (the stateful nvidia-smi stand-in) and shared-start.json in each run.
import { describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { engineFleet } from "./engine-fleet.js";
import { engineProcesses, runCli, status, teardown } from "./cli.js";
import { editCheckedPlan, killAt } from "./campaign.js";

describe("reconcile with a shared GPU", () => {
  it("starts both sharing engines through start-shared and captures them", async () => {
    const fleet = await engineFleet();
    try {
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], fleet.env);
      expect(r.code, r.stderr.slice(-3000)).toBe(0);
      const engines = (await status(fleet.stateDir)).engines;
      expect(engines.map((e) => e.phase)).toEqual(["captured", "captured"]);
      const records = await Promise.all(
        engines.map(async (e) => JSON.parse(await fs.readFile(path.join(e.run_dir!, "shared-start.json"), "utf8"))),
      );
      expect(records.map((x) => x.status)).toEqual(["ready", "ready"]);
      expect(records.map((x) => x.launch_order).sort()).toEqual([1, 2]);
      expect(new Set(records.map((x) => x.engines.join(",")))).toEqual(new Set(["engine-1,engine-2"]));
      for (const x of records) {
        expect(x.allowance.device_allowance).toBe("0.3");
        expect(x.readings.after.used_mib).toBeGreaterThan(x.readings.baseline.used_mib);
        expect(x.identity.handle.pid).toBe(engines.find((e) => e.engine === x.engine)!.pid);
      }
    } finally {
      await teardown(fleet.stateDir);
    }
  });

  it("refuses a sharing engine whose plan and checked.json were both edited while it was checked: the state's hash tells", async () => {
    const fleet = await engineFleet();
    try {
      // The first spawn of the shared start: both engines are checked and on disk, nothing runs yet.
      await killAt(fleet, { name: "native:spawn:before", hit: 1 }, fleet.env);
      const edit = await editCheckedPlan(fleet, { rebindChecked: true });
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], fleet.env);
      expect(r.code, r.stderr.slice(-3000)).toBe(2);
      const engines = (await status(fleet.stateDir)).engines;
      const victim = engines.find((e) => e.engine === edit.engine)!;
      expect(victim.phase).toBe("failed");
      expect(victim.last_error).toMatchObject({ step: "start", retryable: false, input: edit.planFile });
      expect(victim.last_error!.message).toContain(
        `${edit.planFile} hashes to ${edit.editedSha}, but the state file's record of the prepared run binds ${edit.checkedSha}`,
      );
      expect(await edit.markerExists(), "the edited command ran").toBe(false);
      expect((await engineProcesses(fleet.stateDir)).map((p) => p.engine)).toEqual(
        engines.filter((e) => e.engine !== edit.engine).map((e) => e.engine),
      );
    } finally {
      await teardown(fleet.stateDir);
    }
  });

  it("fails both engines' start with the budget named when the device use exceeds the allowance", async () => {
    // Same runtime environment for both (one group); the switch applies to engine-2 only.
    const faults = "gpu_extra_mib=4096@engine-2";
    const fleet = await engineFleet({ engines: [{ faults }, { faults }] });
    try {
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
        ...fleet.env,
        NARWHAL_RETRY_MAX_ATTEMPTS: "1",
      });
      expect(r.code).toBe(2);
      const engines = (await status(fleet.stateDir)).engines;
      for (const e of engines) {
        expect(e.phase).toBe("failed");
        expect(e.last_error!.step).toBe("start");
        expect(e.last_error!.message).toMatch(/shared start of engine-1, engine-2/);
      }
      expect(engines.some((e) => /allowance|MiB/.test(e.last_error!.message))).toBe(true);
      expect(await engineProcesses(fleet.stateDir)).toEqual([]); // start-shared removed what it started
    } finally {
      await teardown(fleet.stateDir);
    }
  });
});
