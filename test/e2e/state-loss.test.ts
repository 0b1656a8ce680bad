// A state file that is lost, does not parse, or is not a state file at all (a
// FIFO, a directory, a symlink to a device, a null record) is never silently
// reset nor waited on: it is moved aside, and the controller rebuilds from what
// it observes (engines by launch token, their run directories' evidence) —
// adopting what still serves. A dead controller's lock never blocks, even once
// its pid is reused.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { readBootId, readProcStat } from "../../src/backends/proc.js";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, kvOf, runCli, status, teardown } from "./cli.js";

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

  it("keeps each engine's evidence in its run directory, and rebuilds from what runs when that evidence was changed", async () => {
    const file = path.join(fleet.stateDir, "narwhal.json");
    type Ref = { $run_file: string; sha256: string };
    type Ctx = { inspection: Ref; checked: { plan_sha256: string }; probe: Ref; run: { dir: string } };
    const state = JSON.parse(await fs.readFile(file, "utf8")) as {
      engines: Record<string, { snapshot: { context: Ctx } }>;
    };
    const ctx = state.engines["engine-1"]!.snapshot.context;
    expect(ctx.inspection.$run_file).toBe("inspection.json");
    expect(ctx.checked).toMatchObject({ plan_sha256: expect.stringMatching(/^[0-9a-f]{64}$/) }); // the plan binding, inline
    expect(ctx.probe.$run_file).toMatch(/^probed(\.\d+)?\.json$/);
    const before = await byEngine();
    const probed = path.join(ctx.run.dir, ctx.probe.$run_file);
    await fs.writeFile(probed, JSON.stringify({ ...JSON.parse(await fs.readFile(probed, "utf8")), edited: "by hand" }));
    const r = await once();
    expect(r.code, r.stdout).toBe(0);
    expect(r.stderr).toContain(
      `could not restore engine-1's snapshot (its probe evidence ${probed} is not the one the state recorded (sha256 differs)); rebuilding it from what runs`,
    );
    expect(r.stderr).not.toMatch(/could not restore engine-2/);
    const after = await byEngine();
    for (const n of ["engine-1", "engine-2"]) {
      expect(after[n]!.phase).toBe("captured");
      expect(after[n]!.pid).toBe(before[n]!.pid);
    }
  });

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
    for (const record of Object.values(state.engines) as Array<{ snapshot: { value: string } }>)
      record.snapshot.value = "a-state-this-machine-does-not-have";
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

  it("keeps the pair proven when only the prefill is rebuilt: the restored decode's KV verdict follows it", async () => {
    const before = await byEngine();
    const file = path.join(fleet.stateDir, "narwhal.json");
    const state = JSON.parse(await fs.readFile(file, "utf8"));
    state.engines["engine-1"].snapshot.value = "a-state-this-machine-does-not-have";
    await fs.writeFile(file, JSON.stringify(state));
    const r = await once();
    // The decode was restored first, beside no captured prefill: a plan must see the adopted prefill captured.
    expect(r.code, r.stdout).toBe(0);
    expect(r.stderr).toContain("could not restore engine-1's snapshot");
    expect(r.stderr).not.toContain("could not restore engine-2's snapshot");
    const after = await byEngine();
    for (const n of ["engine-1", "engine-2"]) {
      expect(after[n]!.phase).toBe("captured");
      expect(after[n]!.pid).toBe(before[n]!.pid);
      expect(kvOf(after[n])).toMatchObject({ status: "True", reason: "Proven" });
    }
  });

  const notAFile: Array<[string, string, (f: string) => Promise<unknown>]> = [
    ["a FIFO", "a FIFO", async (f) => spawnSync("mkfifo", [f])],
    ["a directory", "a directory", (f) => fs.mkdir(f)],
    ["a symlink to /dev/zero", "a character device", (f) => fs.symlink("/dev/zero", f)],
  ];
  for (const [title, what, make] of notAFile) {
    it(`status refuses, and reconcile sets aside and rebuilds, when the state file is ${title}`, async () => {
      const before = await byEngine();
      const file = path.join(fleet.stateDir, "narwhal.json");
      await fs.rm(file);
      await make(file);
      const dead = spawnSync(process.execPath, ["-e", "0"]).pid!;
      const staleTemp = path.join(fleet.stateDir, `.narwhal.json.${dead}.0a1b2c3d.tmp`); // as a SIGKILL mid-write leaves
      await fs.writeFile(staleTemp, "{");
      const shown = await runCli(["status", "--state", fleet.stateDir]);
      expect(shown.code).toBe(1);
      expect(shown.stderr).toContain(`state file ${file} is ${what}, not a regular file`);
      expect(shown.stderr).toContain("Fix: Run `narwhal reconcile`");
      expect(shown.stderr).not.toMatch(/^\s+at /m); // a typed error, not a stack trace
      const r = await once();
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(
        new RegExp(`is ${what}, not a regular file; moved aside to \\S+narwhal\\.json\\.refused-`),
      );
      const after = await byEngine();
      for (const n of ["engine-1", "engine-2"]) {
        expect(after[n]!.phase).toBe("captured");
        expect(after[n]!.pid).toBe(before[n]!.pid);
      }
      expect((await fs.lstat(file)).isFile()).toBe(true);
      await expect(fs.stat(staleTemp)).rejects.toMatchObject({ code: "ENOENT" });
      for (const aside of (await fs.readdir(fleet.stateDir)).filter((f) => f.startsWith("narwhal.json.refused-"))) {
        await fs.rm(path.join(fleet.stateDir, aside), { recursive: true });
      }
    });
  }

  it("sets aside valid JSON whose engine record is null, and adopts the running engines", async () => {
    const before = await byEngine();
    const file = path.join(fleet.stateDir, "narwhal.json");
    const state = JSON.parse(await fs.readFile(file, "utf8"));
    state.engines["engine-1"] = null;
    await fs.writeFile(file, JSON.stringify(state));
    const shown = await runCli(["status", "--state", fleet.stateDir]);
    expect(shown.code).toBe(1);
    expect(shown.stderr).toContain('$.engines["engine-1"]');
    expect(shown.stderr).not.toMatch(/TypeError|^\s+at /m);
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/not a narwhal state file.*moved aside to \S+narwhal\.json\.corrupt-/);
    const after = await byEngine();
    for (const n of ["engine-1", "engine-2"]) expect(after[n]!.pid).toBe(before[n]!.pid);
  });

  it("takes over a killed controller's lock once its pid belongs to another process, and names a live holder's command line", async () => {
    const lock = path.join(fleet.stateDir, "controller.lock");
    const unrelated = spawn("sleep", ["600"], { stdio: "ignore" });
    try {
      await new Promise((r) => unrelated.once("spawn", r));
      // Wait for exec: until then the child's command line and start ticks are still node's fork.
      while (!(await fs.readFile(`/proc/${unrelated.pid}/cmdline`, "utf8")).startsWith("sleep"))
        await new Promise((r) => setImmediate(r));
      const ticks = (await readProcStat(unrelated.pid!))!.startTicks;
      const holder = {
        pid: unrelated.pid,
        host: os.hostname(),
        boot_id: await readBootId(),
        since: new Date().toISOString(),
      };
      await fs.writeFile(lock, JSON.stringify({ ...holder, start_ticks: ticks }));
      const held = await once();
      expect(held.code).toBe(1);
      expect(held.stderr).toContain(`held by another controller (pid ${unrelated.pid} on ${os.hostname()}`);
      expect(held.stderr).toContain("command line: sleep 600");
      // The same pid with other start ticks: the controller that wrote it is gone, whatever runs at its pid now.
      await fs.writeFile(lock, JSON.stringify({ ...holder, start_ticks: ticks + 1 }));
      const r = await once();
      expect(r.code, r.stderr).toBe(0);
      expect(unrelated.exitCode).toBeNull();
      await expect(fs.stat(lock)).rejects.toMatchObject({ code: "ENOENT" }); // released on exit
    } finally {
      unrelated.kill("SIGKILL");
    }
  });

  it("adopts an engine serving old inputs as retiring, and replaces it once the new plan is checked", async () => {
    const before = await byEngine();
    await fs.rm(path.join(fleet.stateDir, "narwhal.json"));
    await fleet.write({ engines: [{}, { extraArgs: ["--max-num-seqs", "16"] }] });
    const r = await once();
    // engine-2's runtime record now differs (a group of its own, seed 000), but its NIXL inputs do not: the
    // pair follows the NIXL hash (kv-pairs.ts), is proven again, and --once converges (exit 0).
    expect(r.code, r.stderr).toBe(0);
    const after = await byEngine();
    expect(after["engine-1"]!.pid).toBe(before["engine-1"]!.pid);
    expect(after["engine-2"]!.pid).not.toBe(before["engine-2"]!.pid);
    expect(after["engine-2"]!.history.map((h) => h.to)).toContain("replacing");
    expect((await engineProcesses(fleet.stateDir)).map((p) => p.engine).sort()).toEqual(["engine-1", "engine-2"]);
  });
});
