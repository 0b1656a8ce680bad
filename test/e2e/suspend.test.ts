// narwhal suspend / resume / retry against real simulator engines while watch
// mode holds the state lock: a suspended engine is not replaced when its
// desired input changes (its partner's change goes on), `plan` and `status`
// show it suspended, the suspension survives a controller restart, resume
// converges it; retry gives a terminal failure a fresh attempt without
// restarting the controller.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { runCli, startCli, status, teardown, waitFor } from "./cli.js";

describe("narwhal suspend, resume and retry while watch mode runs", () => {
  let fleet: SimFleet;
  let controller: ChildProcess | null = null;
  let faultsFile: string;
  const dirs = () => ["--desired", fleet.dir, "--state", fleet.stateDir];
  const byEngine = async () =>
    Object.fromEntries((await status(fleet.stateDir, fleet.dir)).engines.map((e) => [e.engine, e]));
  const start = async () => {
    controller = startCli(["reconcile", ...dirs()]);
    controller.stderr!.resume();
    controller.stdout!.resume();
    await waitFor(
      "the controller to hold the lock",
      async () => (await status(fleet.stateDir, fleet.dir)).controller?.running === true,
    );
  };
  const stop = async () => {
    const c = controller!;
    const exited = new Promise((r) => c.on("close", r));
    c.kill("SIGTERM");
    await exited;
    controller = null;
  };
  const settledAt = (engine: string) =>
    waitFor(
      `${engine} captured at its desired inputs`,
      async () => {
        const e = (await byEngine())[engine];
        return e?.phase === "captured" && e.applied_hash === e.desired_hash_now && e.running_hash === e.applied_hash
          ? e
          : undefined;
      },
      120_000,
    );

  beforeAll(async () => {
    fleet = await simFleet();
    faultsFile = path.join(path.dirname(fleet.stateDir), "faults");
    const environment = { NARWHAL_SIM_FAULTS_FILE: faultsFile };
    await fleet.write({ engines: [{ environment }, { environment }] });
    await start();
    await settledAt("engine-1");
    await settledAt("engine-2");
  });
  afterAll(async () => {
    controller?.kill("SIGKILL");
    await teardown(fleet.stateDir);
  });

  it("a suspended engine is not replaced by an edit; plan and status say so; it survives a restart; resume converges it", async () => {
    const before = await byEngine();
    const s = await runCli(["suspend", "engine-1", ...dirs()]);
    expect(s.code, s.stderr).toBe(0);
    expect(s.stdout).toContain("engine-1: suspended: observed, never changed");
    const environment = { NARWHAL_SIM_FAULTS_FILE: faultsFile };
    const edit = { environment, extraArgs: ["--max-num-seqs", "64"] };
    await fleet.write({ engines: [edit, edit] });
    // The partner's change goes on without it; when it has converged, the suspended engine is as it was.
    const e2 = await settledAt("engine-2");
    expect(e2.applied_hash).not.toBe(before["engine-2"]!.applied_hash);
    const now = await byEngine();
    expect(now["engine-1"]).toMatchObject({
      applied_hash: before["engine-1"]!.applied_hash,
      pid: before["engine-1"]!.pid,
      phase: "captured",
    });
    expect(now["engine-1"]!.desired_hash_now).not.toBe(now["engine-1"]!.applied_hash);
    expect(now["engine-1"]!.suspended_since).toEqual(expect.any(String));
    const table = await runCli(["status", ...dirs()]);
    expect(table.stdout).toMatch(/^engine-1 +captured SUSPENDED /m);
    const plan = await runCli(["plan", ...dirs()]);
    expect(plan.stdout).toContain("suspended since");
    expect(plan.stdout).toContain("held: replace (inputs");

    // Persisted: a new controller keeps it suspended.
    await stop();
    await start();
    const planAgain = await runCli(["plan", "--format", "json", ...dirs()]);
    const actions = (
      JSON.parse(planAgain.stdout) as { plan: { actions: Array<{ engine: string; kind: string; until?: string }> } }
    ).plan.actions;
    expect(actions.filter((a) => a.engine === "engine-1")).toEqual([
      expect.objectContaining({ kind: "wait", until: "suspended" }),
    ]);
    expect((await byEngine())["engine-1"]!.pid).toBe(before["engine-1"]!.pid);

    const r = await runCli(["resume", "engine-1", ...dirs()]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("engine-1: resumed");
    const e1 = await settledAt("engine-1");
    expect(e1.suspended_since).toBeNull();
    expect(e1.pid).not.toBe(before["engine-1"]!.pid);
  });

  it("names an unknown engine (exit 1) and refuses a retry of an engine that did not fail terminally", async () => {
    const unknown = await runCli(["suspend", "engin-1", ...dirs()]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no engine named engin-1");
    const notFailed = await runCli(["retry", "engine-2", ...dirs()]);
    expect(notFailed.code).toBe(1);
    expect(notFailed.stdout).toContain("engine-2: not failed terminally (phase captured): nothing to retry");
  });

  it("retry gives a terminally failed engine a fresh attempt budget without restarting the controller", async () => {
    const pid = controller!.pid;
    await fs.writeFile(faultsFile, "crash_at_start@engine-1\n");
    // A restart from a fresh run: the SIGKILLed engine is lost, restarted, and crashes until no attempt is left.
    const { pid: enginePid } = (await byEngine())["engine-1"]!;
    process.kill(-enginePid!, "SIGKILL");
    await waitFor(
      "engine-1 terminally failed",
      async () => {
        const e = (await byEngine())["engine-1"];
        return e?.phase === "failed" &&
          (e.last_error?.message ?? "") !== "" &&
          e.conditions !== undefined &&
          e.retry_at === null
          ? e
          : undefined;
      },
      120_000,
    );
    await fs.writeFile(faultsFile, "");
    const r = await runCli(["retry", "engine-1", ...dirs()]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain("engine-1: a fresh attempt budget: retrying now");
    await settledAt("engine-1");
    expect(controller!.pid).toBe(pid);
  });
});
