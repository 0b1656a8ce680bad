// Watch mode: the controller converges on every desired edit and on drift,
// keeps the last valid desired state through an invalid edit, holds the state
// lock, and leaves engines running when told to stop.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import type { ChildProcess } from "node:child_process";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { CLI, engineProcesses, runCli, startCli, status, teardown, waitFor } from "./cli.js";

describe("reconcile (watch mode) on the native backend", () => {
  let fleet: SimFleet;
  let controller: ChildProcess;
  let log = "";

  const engines = async () => Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, e]));
  const allCaptured = async () => {
    const e = await engines();
    return Object.keys(e).length === 2 && Object.values(e).every((x) => x.phase === "captured") ? e : undefined;
  };

  beforeAll(async () => {
    fleet = await simFleet();
    controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir]);
    controller.stdout!.on("data", (d) => (log += d));
    controller.stderr!.on("data", (d) => (log += d));
  });
  afterAll(async () => {
    if (controller.exitCode === null) controller.kill("SIGKILL");
    await teardown(fleet.stateDir);
  });

  it("converges, then replaces only the engine whose launch record changed", async () => {
    const first = await waitFor("both captured", allCaptured);
    await fleet.write({ engines: [{}, { extraArgs: ["--max-num-seqs", "16"] }] });
    const second = await waitFor("engine-2 replaced", async () => {
      const e = await allCaptured();
      return e && e["engine-2"]!.pid !== first["engine-2"]!.pid ? e : undefined;
    });
    expect(second["engine-1"]!.pid).toBe(first["engine-1"]!.pid);
    expect(second["engine-1"]!.run_dir).toBe(first["engine-1"]!.run_dir);
    expect(second["engine-2"]!.run_dir).not.toBe(first["engine-2"]!.run_dir);
  });

  it("refuses a second controller on the same state directory, naming the holder", async () => {
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`held by another controller \\(pid ${controller.pid} `));
    expect(r.stderr).toContain(`command line: ${process.execPath} ${CLI} reconcile`); // what the operator would be stopping
  });

  it("keeps the last valid desired state through a half-written file", async () => {
    const before = await allCaptured();
    await fs.writeFile(path.join(fleet.dir, "engine-launch.json"), '{"engines": {"engine-1": {"role": ');
    await waitFor("the error in the log", async () => log.includes("engine-launch.json"), 10_000);
    const after = await engines();
    for (const name of ["engine-1", "engine-2"]) expect(after[name]!.pid).toBe(before![name]!.pid);
    expect(controller.exitCode).toBeNull();
    await fleet.write({ engines: [{}, { extraArgs: ["--max-num-seqs", "16"] }] });
  });

  it("restarts an engine whose process died (drift resync)", async () => {
    const before = (await waitFor("both captured", allCaptured))["engine-1"]!;
    process.kill(-before.pid!, "SIGKILL");
    const after = await waitFor("engine-1 restarted", async () => {
      const e = await allCaptured();
      return e && e["engine-1"]!.pid !== before.pid ? e["engine-1"] : undefined;
    });
    expect(after!.run_dir).not.toBe(before.run_dir); // a fresh start needs a fresh run directory
    expect((await engineProcesses(fleet.stateDir)).length).toBe(2);
  });

  it("exits 0 on SIGTERM and leaves the engines running", async () => {
    const running = await engineProcesses(fleet.stateDir);
    controller.kill("SIGTERM");
    const code = await new Promise((r) => controller.once("exit", r));
    expect(code).toBe(0);
    expect((await engineProcesses(fleet.stateDir)).map((p) => p.pid).sort()).toEqual(running.map((p) => p.pid).sort());
    await expect(fs.access(path.join(fleet.stateDir, "controller.lock"))).rejects.toThrow();
  });
});
