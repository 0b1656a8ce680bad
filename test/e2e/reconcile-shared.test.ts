// The reconciler starts engines that share one GPU through the start-shared
// path: together, in sequence, with the budget checked against real readings
// (the stateful nvidia-smi stand-in) and shared-start.json in each run.
import { describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { engineFleet, SHARED_GPU } from "./engine-fleet.js";
import { engineProcesses, runCli, status, teardown } from "./cli.js";
import { editCheckedPlan, killAt } from "./campaign.js";

describe("reconcile with a shared GPU", () => {
  // NARWHAL_NODE_CONCURRENCY=1 is below the sharing group: the two gather before their launch takes the
  // node's one slot, so they still start together (holding a slot while waiting would start each alone).
  it.each([
    ["at the default node concurrency", {}],
    ["with one slot on the node (NARWHAL_NODE_CONCURRENCY=1)", { NARWHAL_NODE_CONCURRENCY: "1" }],
  ])("starts both sharing engines through start-shared and captures them, %s", async (_, extra) => {
    const fleet = await engineFleet();
    try {
      const env = { ...fleet.env, ...extra };
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], env);
      expect(r.code, r.stderr.slice(-3000)).toBe(0);
      const engines = (await status(fleet.stateDir)).engines;
      expect(engines.map((e) => e.phase)).toEqual(["captured", "captured"]);
      // Both inspections begin together: with one slot, one of them says it waits for it.
      if ("NARWHAL_NODE_CONCURRENCY" in extra)
        expect(r.stderr).toMatch(/waiting for a free slot on node \S+ \(all 1 of NARWHAL_NODE_CONCURRENCY taken/);
      else expect(r.stderr).not.toMatch(/a free slot on node/);
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

  // The simulator's CUDA enumerates the H100s fastest-first as (2A:00.0, 18:00.0); nvidia-smi lists them by bus.
  const OTHER_GPU = "GPU-9e8d7c6b-5a4f-4e2d-8c0b-a9f8e7d6c5b4";
  const reordered = (gpu: string) => ({ gpus: [gpu], environment: { NARWHAL_SIM_CUDA_FASTEST_FIRST: "1,0" } });

  it("starts on the GPU the runtime's device order selects: ordinal 1 is shared_device.gpu_uuid there, nvidia-smi's 0", async () => {
    const fleet = await engineFleet({ engines: [reordered("1"), reordered("1")] });
    try {
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], fleet.env);
      expect(r.code, r.stderr.slice(-3000)).toBe(0);
      const engines = (await status(fleet.stateDir)).engines;
      expect(engines.map((e) => e.phase)).toEqual(["captured", "captured"]);
      const records = await Promise.all(
        engines.map(async (e) => JSON.parse(await fs.readFile(path.join(e.run_dir!, "shared-start.json"), "utf8"))),
      );
      for (const x of records) {
        expect(x.gpu).toMatchObject({ uuid: SHARED_GPU, selected: "1", index: 0 });
        expect(x.gpu.runtime).toMatchObject({
          binding: "cuda.bindings.driver",
          cuda_device_order: "FASTEST_FIRST",
          visible_devices: "1",
          ordinal: 1,
          uuid: SHARED_GPU,
          devices: [
            { ordinal: 0, uuid: OTHER_GPU },
            { ordinal: 1, uuid: SHARED_GPU },
          ],
          visible: [{ ordinal: 0, uuid: SHARED_GPU }],
        });
      }
      // Both engines hold their share of the shared GPU (nvidia-smi's reading of it): they run where narwhal resolved.
      const last = records.find((x) => x.launch_order === 2)!;
      expect(last.increase_mib.aggregate).toBe(Math.floor(0.1 * 81559) + Math.floor(0.2 * 81559));
    } finally {
      await teardown(fleet.stateDir);
    }
  });

  it("refuses an ordinal that is shared_device.gpu_uuid in nvidia-smi's order but another GPU in the runtime's, before launching", async () => {
    const fleet = await engineFleet({ engines: [reordered("0"), reordered("0")] });
    try {
      const [one, two] = [await fleet.prepared("e1", "engine-1"), await fleet.prepared("e2", "engine-2")];
      const r = await fleet.engine(["start-shared", "--backend", "native", "--run", one, "--run", two]);
      expect(r.code, r.stderr).toBe(1);
      // The Error document (src/cli/exit-codes.ts): flat, the action's name as its step.
      expect(JSON.parse(r.stderr)).toMatchObject({
        kind: "Error",
        name: "ActionError",
        step: "start-shared",
        engine: "engine-1",
        retryable: false,
        run: one,
        message: `on node local, CUDA_VISIBLE_DEVICES=0 resolves to ${OTHER_GPU} (runtime ordinal 0, CUDA_DEVICE_ORDER=FASTEST_FIRST; the runtime lists 0=${OTHER_GPU}, 1=${SHARED_GPU}), not shared_device.gpu_uuid ${SHARED_GPU}`,
        input: `CUDA_VISIBLE_DEVICES=0 (gpu_ids in ${path.join(one, "launch.json")})`,
        fix: expect.stringContaining(`select the GPU by its full UUID (GPU-…), which no device order renumbers`),
      });
      for (const dir of [one, two]) expect(await fs.readdir(dir)).not.toContain("native-process.json");
      expect(await engineProcesses(fleet.stateDir)).toEqual([]);
    } finally {
      await teardown(fleet.stateDir);
    }
  });
});
