// Engine faults beyond startup: an engine that dies after `captured`, one that
// stays alive but unhealthy, one that never becomes ready, a runtime without
// NIXL. Each ends in a repair or a clear `failed` reason, and the history shows it.
import { afterAll, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, runCli, startCli, status, teardown, waitFor } from "./cli.js";

type Engines = Awaited<ReturnType<typeof status>>["engines"];

function watch(fleet: SimFleet): ChildProcess {
  return startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir]);
}

async function stopWatch(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill("SIGTERM");
  await new Promise((r) => child.once("exit", r));
}

describe("engine faults under watch mode", () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const c of cleanup) await c();
  });

  it("restarts an engine that crashes after captured, then gives up on the crash loop with the cause", async () => {
    // 6 s of serving before each crash: probe and capture (with its attestation) must finish first, and on a
    // loaded two-core machine (load 10) they did not within 2 s, so the engine was never captured at all.
    const fleet = await simFleet({ engines: [{ faults: "crash_after=6" }] });
    const child = watch(fleet);
    cleanup.push(
      () => stopWatch(child),
      () => teardown(fleet.stateDir),
    );
    const failed = await waitFor(
      "a terminal failure",
      async () => {
        const [e] = (await status(fleet.stateDir)).engines as Engines;
        return e &&
          e.phase === "failed" &&
          e.conditions.some((c) => c.type === "Failed" && c.status === "True" && c.reason === "Terminal")
          ? e
          : undefined;
      },
      90_000,
    );
    expect(failed.last_error).toMatchObject({ step: "observe" });
    expect(failed.last_error!.message).toMatch(/no longer running: exited; last log lines: .*/);
    const phases = failed.history.map((h) => h.to);
    expect(phases.filter((p) => p === "captured").length).toBe(2); // it was restarted once (attempts: 2)
    expect(phases.at(-1)).toBe("failed");
    expect(await engineProcesses(fleet.stateDir)).toEqual([]);
  });

  it("stops and restarts an engine whose /health turns 503 while its process lives", async () => {
    // /health turns 503 when the test turns the switch on (the simulator's faults file), not on a timer: the engine
    // stays captured, healthy, until then. (With dead_after=1, captured lasted about two resync periods, which the
    // status poll could miss, and a probe later than 1 s into serving failed instead.)
    const fleet = await simFleet();
    const faultsFile = path.join(path.dirname(fleet.stateDir), "sim-faults");
    await fleet.write({ engines: [{ environment: { NARWHAL_SIM_FAULTS_FILE: faultsFile } }] });
    const child = watch(fleet);
    cleanup.push(
      () => stopWatch(child),
      () => teardown(fleet.stateDir),
    );
    const first = await waitFor(
      "captured",
      async () => (await status(fleet.stateDir)).engines.find((e) => e.phase === "captured"),
      30_000,
    );
    await fs.writeFile(faultsFile, "health_status=503\n");
    const after = await waitFor(
      "a restart for ill health",
      async () =>
        (await status(fleet.stateDir)).engines.find((e) =>
          e.history.some((h) => (h.note ?? "").includes("unhealthy: /health answered 503")),
        ),
      30_000,
    );
    expect(after.history.filter((h) => h.to === "failed").length).toBeGreaterThan(0);
    // The unhealthy process was stopped, not leaked next to its replacement.
    const procs = await engineProcesses(fleet.stateDir);
    expect(procs.length).toBeLessThanOrEqual(1);
    expect(procs.map((p) => p.pid)).not.toContain(first.pid);
  });
});

describe("engine faults under reconcile --once", () => {
  it("fails start with the readiness budget named when the engine never answers, and leaves no process", async () => {
    const fleet = await simFleet({ engines: [{ faults: "slow_start=60" }], readySeconds: 2 });
    try {
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
      expect(r.code).toBe(2);
      const [e] = (await status(fleet.stateDir)).engines;
      expect(e!.last_error).toMatchObject({ step: "start", input: "NARWHAL_READY_SECONDS" });
      expect(e!.last_error!.message).toMatch(/did not answer .*\/health within 2s and was stopped/);
      expect(await engineProcesses(fleet.stateDir)).toEqual([]);
    } finally {
      await teardown(fleet.stateDir);
    }
  });

  it("fails the check naming NIXL when the runtime cannot import it", async () => {
    const fleet = await simFleet({ engines: [{ faults: "no_nixl" }] });
    try {
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
      expect(r.code).toBe(2);
      const [e] = (await status(fleet.stateDir)).engines;
      expect(e!.last_error!.step).toBe("check");
      expect(e!.last_error!.message).toMatch(/nixl/i);
    } finally {
      await teardown(fleet.stateDir);
    }
  });
});
