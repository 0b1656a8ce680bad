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

  it("restarts from a fresh run an engine that died while its probe was failing, not probing the dead one until terminal", async () => {
    // The probe fails retryably while the engine lives (an empty completion), the engine dies during the backoff,
    // and no resync comes between (600 s): only the next probe can find it gone. The build before took that
    // probe's failure (GET /health refused) as the probe's own, retried it against the dead process until the
    // attempts were spent, and exited 2 with the engine failed for good.
    const fleet = await simFleet();
    const faultsFile = path.join(path.dirname(fleet.stateDir), "sim-faults");
    await fs.writeFile(faultsFile, "empty_completion\n");
    await fleet.write({ engines: [{ environment: { NARWHAL_SIM_FAULTS_FILE: faultsFile } }] });
    try {
      const child = startCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
        NARWHAL_RETRY_BASE_MS: "4000",
        NARWHAL_RETRY_CAP_MS: "4000",
        NARWHAL_RETRY_MAX_ATTEMPTS: "4",
        NARWHAL_RESYNC_MS: "600000",
      });
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      const failing = await waitFor(
        "the probe failing on the empty completion",
        async () =>
          (await status(fleet.stateDir)).engines.find(
            (e) => e.phase === "failed" && e.last_error?.step === "probe" && /no text/.test(e.last_error.message),
          ),
        60_000,
      );
      const [engine] = await engineProcesses(fleet.stateDir);
      expect(engine!.pid).toBe(failing.pid);
      await fs.rm(faultsFile);
      process.kill(-engine!.pid, "SIGKILL");
      expect(await exited).toBe(0);
      const [e] = (await status(fleet.stateDir)).engines;
      expect(e!.phase).toBe("captured");
      expect(e!.pid).not.toBe(failing.pid);
      const lost = e!.history.find((h) =>
        /^probe: the engine is no longer running: exited during its probe \(GET \/health failed: /.test(h.note ?? ""),
      );
      expect(lost, JSON.stringify(e!.history)).toBeDefined();
      expect(e!.history.filter((h) => h.to === "captured")).toHaveLength(1);
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
