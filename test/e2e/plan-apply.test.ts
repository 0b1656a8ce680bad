// `narwhal plan` and `narwhal apply FILE` through the built CLI on the native backend (issue 9
// item 3): plan acts on nothing (same processes, same state file bytes, same files, no log
// growth); apply executes exactly a saved plan; a plan the world moved past is refused.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, runCli, startCli, status, teardown, waitFor } from "./cli.js";

/** Everything `plan` could disturb, read the same way before and after. */
async function snapshot(stateDir: string) {
  const files = (await fs.readdir(stateDir, { recursive: true })).map(String).sort();
  const logSize = await fs.stat(path.join(stateDir, "narwhal.log")).then(
    (s) => s.size,
    () => -1,
  );
  const pids = (await engineProcesses(stateDir)).map((p) => `${p.engine}:${p.pid}`).sort();
  return { pids, state: await fs.readFile(path.join(stateDir, "narwhal.json"), "utf8"), files, logSize };
}

const pidOf = async (stateDir: string) =>
  Object.fromEntries((await engineProcesses(stateDir)).map((p) => [p.engine, p.pid]));

describe("narwhal plan and apply", () => {
  let fleet: SimFleet;
  let root: string;
  const engine1 = (seqs: string) => ({ extraArgs: ["--max-num-seqs", seqs] });
  const plan = (...extra: string[]) => runCli(["plan", "--desired", fleet.dir, "--state", fleet.stateDir, ...extra]);
  const apply = (file: string) => runCli(["apply", file]);

  beforeAll(async () => {
    // engine-1's own extra_args give it a group of its own (seed 000): a fleet of two groups has no pair to
    // prove, so this file (about plans, not KV) does not prove.
    fleet = await simFleet({ engines: [engine1("8"), {}], kvTransfer: { prove: false } });
    root = path.dirname(fleet.dir);
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => {
    await teardown(fleet.stateDir);
  });

  it("after a converge: exits 0, says so, and touches nothing", async () => {
    const before = await snapshot(fleet.stateDir);
    expect(before.pids).toHaveLength(2);
    const r = await plan();
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("No changes. The fleet matches");
    const json = await plan("--format", "json");
    expect(json.code, json.stderr).toBe(0);
    const saved = JSON.parse(json.stdout);
    expect(saved).toMatchObject({
      apiVersion: "narwhal/v1",
      kind: "Plan",
      desired_dir: fleet.dir,
      state_dir: fleet.stateDir,
      plan: { changes: false },
    });
    expect(Object.keys(saved.desired.engines)).toEqual(["engine-1", "engine-2"]);
    expect(await snapshot(fleet.stateDir)).toEqual(before);
  });

  it("after an extra_args edit of engine-1: exits 2, names engine-1 and the field, and leaves everything running", async () => {
    const before = await snapshot(fleet.stateDir);
    await fleet.write({ engines: [engine1("16"), {}] });
    const r = await plan();
    expect(r.code, r.stderr).toBe(2);
    const lines = r.stdout.trimEnd().split("\n");
    const head = lines.findIndex((l) => /^ {2}~ engine-1\b.*replace/.test(l));
    expect(head, r.stdout).toBeGreaterThanOrEqual(0);
    expect(lines[head + 1]).toMatch(/^ {6}launch\.runtime\.extra_args\[1\]: "8" → "16" {2}\(forces replacement/);
    expect(r.stdout).not.toMatch(/engine-2\b.*replace/);
    expect(lines.at(-1)).toBe("Plan: 1 to replace, 0 to create, 0 to remove.");
    expect(await snapshot(fleet.stateDir)).toEqual(before);
  });

  it("apply of a saved plan replaces exactly engine-1", async () => {
    const before = await pidOf(fleet.stateDir);
    const file = path.join(root, "p.json");
    const planned = await plan("--out", file);
    expect(planned.code, planned.stderr).toBe(2);
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    expect(
      JSON.parse(await fs.readFile(file, "utf8")).plan.actions.map(
        (a: { kind: string; engine: string }) => `${a.kind} ${a.engine}`,
      ),
    ).toEqual(["replace engine-1"]);
    const r = await apply(file);
    expect(r.code, r.stderr).toBe(0);
    const after = await pidOf(fleet.stateDir);
    expect(after["engine-2"]).toBe(before["engine-2"]);
    expect(after["engine-1"]).toBeGreaterThan(0);
    expect(after["engine-1"]).not.toBe(before["engine-1"]);
    const engines = Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, e]));
    expect(engines["engine-1"]).toMatchObject({ phase: "captured", pid: after["engine-1"] });
    expect(engines["engine-2"]).toMatchObject({ phase: "captured", pid: before["engine-2"] });
    // Applied: nothing is left to do.
    expect((await plan()).code).toBe(0);
  });

  it("refuses a stale plan (desired edited again after --out) with exit 1, naming the engine and what changed; nothing is touched", async () => {
    await fleet.write({ engines: [engine1("24"), {}] });
    const file = path.join(root, "stale.json");
    expect((await plan("--out", file)).code).toBe(2);
    await fleet.write({ engines: [engine1("32"), {}] });
    const pids = await pidOf(fleet.stateDir);
    const runs = (await fs.readdir(path.join(fleet.stateDir, "runs"), { recursive: true })).map(String).sort();
    const stateBytes = await fs.readFile(path.join(fleet.stateDir, "narwhal.json"), "utf8");
    const r = await apply(file);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/the saved plan is stale/);
    expect(r.stderr).toMatch(/engine-1: desired input hash changed since the plan \([0-9a-f]{12}… → [0-9a-f]{12}…\)/);
    expect(r.stderr).toMatch(/narwhal plan again/i);
    expect(r.stderr).not.toMatch(/engine-2:/);
    const json = await runCli(["apply", file, "--format", "json"]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stderr)).toMatchObject({
      apiVersion: "narwhal/v1",
      kind: "Error",
      name: "StalePlanError",
      input: file,
      exit_code: 1,
      differences: [expect.stringMatching(/^engine-1: desired input hash changed/)],
    });
    expect(await pidOf(fleet.stateDir)).toEqual(pids);
    expect((await fs.readdir(path.join(fleet.stateDir, "runs"), { recursive: true })).map(String).sort()).toEqual(runs);
    expect(await fs.readFile(path.join(fleet.stateDir, "narwhal.json"), "utf8")).toBe(stateBytes);
    const engines = await status(fleet.stateDir);
    for (const e of engines.engines) expect(e.phase, e.engine).toBe("captured");
  });

  it("refuses a plan whose observed world moved (an engine died after --out), naming the engine and its launch token", async () => {
    const file = path.join(root, "died.json");
    expect((await plan("--out", file)).code).toBe(2);
    const victim = (await engineProcesses(fleet.stateDir)).find((p) => p.engine === "engine-2")!;
    process.kill(-victim.pid, "SIGKILL");
    await waitFor(
      "engine-2's process gone",
      async () => !(await engineProcesses(fleet.stateDir)).some((p) => p.pid === victim.pid),
    );
    const survivors = await pidOf(fleet.stateDir);
    const r = await apply(file);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/engine-2: running engine changed \(launch token \S+… → gone\)/);
    expect(await pidOf(fleet.stateDir)).toEqual(survivors);
    // A fresh plan says what to do about it, and applying that one converges again.
    const fresh = path.join(root, "fresh.json");
    const replanned = await plan("--out", fresh);
    expect(replanned.code).toBe(2);
    expect(replanned.stdout).toMatch(/^ {2}! engine-2\b.*restart-lost/m);
    const applied = await apply(fresh);
    expect(applied.code, applied.stderr).toBe(0);
    expect(Object.keys(await pidOf(fleet.stateDir)).sort()).toEqual(["engine-1", "engine-2"]);
  });

  it("beside a running controller: plans what it would do next and names it; apply refuses the held lock", async () => {
    const controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir]);
    try {
      const lockFile = path.join(fleet.stateDir, "controller.lock");
      await waitFor("the watch controller holds the lock", async () => {
        const text = await fs.readFile(lockFile, "utf8").catch(() => "");
        return text !== "" && (JSON.parse(text) as { pid: number }).pid === controller.pid;
      });
      const file = path.join(root, "beside.json");
      const r = await plan("--out", file);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain(`a controller holds ${fleet.stateDir} (pid ${controller.pid} on `);
      const applied = await apply(file);
      expect(applied.code).toBe(1);
      expect(applied.stderr).toContain(`held by another controller (pid ${controller.pid} `);
    } finally {
      controller.kill("SIGTERM");
      await new Promise((resolve) => controller.once("exit", resolve));
    }
    expect(Object.keys(await pidOf(fleet.stateDir)).sort()).toEqual(["engine-1", "engine-2"]);
  });

  it("refuses a file that is not a plan, naming it", async () => {
    const r = await apply(path.join(fleet.stateDir, "narwhal.json"));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${path.join(fleet.stateDir, "narwhal.json")} is not a narwhal plan`);
  });
});

describe("narwhal plan with nothing applied yet", () => {
  it("lists every engine to create, exits 2, and creates no state directory", async () => {
    const fleet = await simFleet();
    const r = await runCli(["plan", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stdout).toMatch(/^ {2}\+ engine-1 \(prefill\) {2}create/m);
    expect(r.stdout).toMatch(/^ {2}\+ engine-2 \(decode\) {2}create/m);
    expect(r.stdout.trimEnd().split("\n").at(-1)).toBe("Plan: 0 to replace, 2 to create, 0 to remove.");
    await expect(fs.stat(fleet.stateDir)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("prints an invalid desired state's errors as validate does, exits 1, and creates nothing", async () => {
    const fleet = await simFleet();
    const launchFile = path.join(fleet.dir, "engine-launch.json");
    const launch = JSON.parse(await fs.readFile(launchFile, "utf8"));
    launch.engines["engine-1"].tensor_parallel_size = 2; // TP ≠ len(gpu_ids)
    await fs.writeFile(launchFile, JSON.stringify(launch));
    const validate = await runCli(["validate", "--desired", fleet.dir]);
    const r = await runCli([
      "plan",
      "--desired",
      fleet.dir,
      "--state",
      fleet.stateDir,
      "--out",
      path.join(fleet.dir, "..", "p.json"),
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/engine-launch\.json .*tensor_parallel_size/);
    expect(r.stderr).toBe(validate.stderr);
    await expect(fs.stat(fleet.stateDir)).rejects.toMatchObject({ code: "ENOENT" });
    await expect(fs.stat(path.join(fleet.dir, "..", "p.json"))).rejects.toMatchObject({ code: "ENOENT" });
  });
});
