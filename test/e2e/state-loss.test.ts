// A state file that is lost or does not parse is never silently reset: it is
// moved aside, and the controller rebuilds from what it observes (engines by
// launch token, their run directories' evidence) — adopting what still serves.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, runCli, status, teardown } from "./cli.js";

describe("losing the state file", () => {
  let fleet: SimFleet;
  const once = () => runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
  const byEngine = async () => Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, e]));

  beforeAll(async () => {
    fleet = await simFleet();
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(() => teardown(fleet.stateDir));

  it("moves a corrupt state file aside and adopts the running engines without restarting them", async () => {
    const before = await byEngine();
    await fs.writeFile(path.join(fleet.stateDir, "narwhal.json"), '{"version": 1, "engines": {"engine-1": {"pha');
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/moved aside/);
    expect(r.stderr).toMatch(/adopting the running engine/);
    const after = await byEngine();
    for (const n of ["engine-1", "engine-2"]) {
      expect(after[n]!.phase).toBe("captured");
      expect(after[n]!.pid).toBe(before[n]!.pid);
      expect(after[n]!.run_dir).toBe(before[n]!.run_dir);
      expect(after[n]!.group_signature).toBe(before[n]!.group_signature);
    }
    const aside = (await fs.readdir(fleet.stateDir)).filter((f) => f.startsWith("narwhal.json.corrupt-"));
    expect(aside.length).toBe(1);
    expect(await fs.readFile(path.join(fleet.stateDir, aside[0]!), "utf8")).toContain('"pha'); // the evidence is kept
  });

  it("rebuilds from the running engines when a recorded snapshot cannot be restored", async () => {
    const before = await byEngine();
    const file = path.join(fleet.stateDir, "narwhal.json");
    const state = JSON.parse(await fs.readFile(file, "utf8"));
    for (const record of Object.values(state.engines) as Array<{ snapshot: { value: string } }>) record.snapshot.value = "a-state-this-machine-does-not-have";
    await fs.writeFile(file, JSON.stringify(state));
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/could not restore/);
    const after = await byEngine();
    for (const n of ["engine-1", "engine-2"]) {
      expect(after[n]!.pid).toBe(before[n]!.pid);
      expect(after[n]!.run_dir).toBe(before[n]!.run_dir);
    }
  });

  it("adopts an engine serving old inputs as retiring, and replaces it once the new plan is checked", async () => {
    const before = await byEngine();
    await fs.rm(path.join(fleet.stateDir, "narwhal.json"));
    await fleet.write({ engines: [{}, { extraArgs: ["--max-num-seqs", "16"] }] });
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    const after = await byEngine();
    expect(after["engine-1"]!.pid).toBe(before["engine-1"]!.pid);
    expect(after["engine-2"]!.pid).not.toBe(before["engine-2"]!.pid);
    expect(after["engine-2"]!.history.map((h) => h.to)).toContain("replacing");
    expect((await engineProcesses(fleet.stateDir)).map((p) => p.engine).sort()).toEqual(["engine-1", "engine-2"]);
  });
});
