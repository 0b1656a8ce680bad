// Retention: `narwhal prune` removes run directories beyond the newest K per
// engine, never the one an engine serves from, prints what it removed, and is
// refused while a controller holds the state lock; watch mode prunes by itself
// once converged, leaving the engines running. Older runs are written with the
// real run-dir writer (createRunDir) beside the runs a real convergence made.
import fs from "node:fs/promises";
import path from "node:path";
import type { ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRunDir, runsRoot } from "../../src/state/run-dir.js";
import type { PruneResult } from "../../src/cli/prune.js";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, runCli, startCli, status, teardown, waitFor } from "./cli.js";

/** `n` older runs of `engine`, a day apart in 2020 (older than any run a convergence makes now). */
async function olderRuns(stateDir: string, engine: string, n: number): Promise<string[]> {
  const made: string[] = [];
  for (let i = 0; i < n; i++) {
    const when = new Date(Date.UTC(2020, 0, 1 + i));
    const dir = await createRunDir(
      stateDir,
      engine,
      "0123456789abcdef",
      [{ name: "launch.json", data: "{}", mode: 0o444 }],
      when,
    );
    made.push(path.basename(dir));
  }
  return made;
}
const runs = async (stateDir: string, engine: string) => (await fs.readdir(runsRoot(stateDir, engine))).sort();
const runDirs = async (fleet: SimFleet) =>
  Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, path.basename(String(e.run_dir))]));

describe("narwhal prune", () => {
  let fleet: SimFleet;
  beforeAll(async () => {
    fleet = await simFleet();
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => teardown(fleet.stateDir));

  it("--dry-run lists what --keep K would remove and removes nothing", async () => {
    const old = await olderRuns(fleet.stateDir, "engine-1", 4); // K + 2 beside the serving run
    const before = await runs(fleet.stateDir, "engine-1");
    const r = await runCli(["prune", "--keep", "2", "--dry-run", "--state", fleet.stateDir, "--format", "json"]);
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout) as PruneResult;
    expect(Object.keys(result).slice(0, 2)).toEqual(["apiVersion", "kind"]);
    expect(result).toMatchObject({ apiVersion: "narwhal/v1", kind: "PruneResult", dry_run: true, keep: 2 });
    const e1 = result.engines.find((e) => e.engine === "engine-1")!;
    expect(e1.removed.map((x) => x.run).sort()).toEqual(old.slice(0, 3));
    expect(await runs(fleet.stateDir, "engine-1")).toEqual(before);
  });

  it("--keep K keeps the newest K per engine and prints what it removed", async () => {
    const serving = await runDirs(fleet);
    const r = await runCli(["prune", "--keep", "2", "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    const left = await runs(fleet.stateDir, "engine-1");
    expect(left).toHaveLength(2);
    expect(left).toContain(serving["engine-1"]);
    expect(r.stdout).toMatch(/engine-1: removed 20200101T000000Z-01234567\n/);
    expect(r.stdout).toMatch(/3 run directories removed \(keeping the newest 2 per engine\)/);
    expect(await runs(fleet.stateDir, "engine-2")).toEqual([serving["engine-2"]]);
  });

  it("--keep 0 removes every run but the ones the engines serve from, which keep running", async () => {
    const serving = await runDirs(fleet);
    const pids = (await engineProcesses(fleet.stateDir)).map((p) => p.pid).sort();
    const r = await runCli(["prune", "--keep", "0", "--state", fleet.stateDir, "--format", "json"]);
    expect(r.code, r.stderr).toBe(0);
    for (const engine of ["engine-1", "engine-2"])
      expect(await runs(fleet.stateDir, engine)).toEqual([serving[engine]]);
    const kept = (JSON.parse(r.stdout) as PruneResult).engines.find((e) => e.engine === "engine-1")!.kept;
    expect(kept).toEqual([{ run: serving["engine-1"], why: "the engine's current plan (run_dir)" }]);
    expect((await engineProcesses(fleet.stateDir)).map((p) => p.pid).sort()).toEqual(pids);
    const after = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(after.code, after.stderr).toBe(0);
  });
});

describe("retention in watch mode", () => {
  let fleet: SimFleet;
  let controller: ChildProcess;
  let log = "";
  beforeAll(async () => {
    fleet = await simFleet();
  });
  afterAll(async () => {
    if (controller && controller.exitCode === null) controller.kill("SIGKILL");
    await teardown(fleet.stateDir);
  });

  it("prunes once converged (NARWHAL_KEEP_RUNS), and refuses narwhal prune while it holds the lock", async () => {
    const old = await olderRuns(fleet.stateDir, "engine-2", 3);
    controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir], { NARWHAL_KEEP_RUNS: "1" });
    controller.stdout!.on("data", (d) => (log += d));
    controller.stderr!.on("data", (d) => (log += d));
    await waitFor(
      "old runs of engine-2 pruned",
      async () => old.every((o) => log.includes(`pruned run ${o}`)),
      120_000,
    );
    const serving = await runDirs(fleet);
    expect(await runs(fleet.stateDir, "engine-2")).toEqual([serving["engine-2"]]);
    const engines = (await status(fleet.stateDir)).engines;
    expect(engines.map((e) => e.phase)).toEqual(["captured", "captured"]);
    const r = await runCli(["prune", "--state", fleet.stateDir]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`held by another controller \\(pid ${controller.pid} `));
    expect(controller.exitCode).toBeNull();
  });
});
