// What retrying can and cannot fix, on real processes: a cause outside
// narwhal's control (a stranger on a planned port, a missing device) is
// outwaited on the resync cadence in watch mode — far past the attempt budget —
// and the engine converges once it is gone, without a controller restart; in
// --once it is outwaited up to NARWHAL_ONCE_OUTWAIT_MS, then exit 2. A failure
// the same inputs repeat (an interpreter that does not exist) is terminal at
// once: one attempt, one run directory.
import { afterAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { ChildProcess } from "node:child_process";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { TEST_ENV, engineProcesses, runCli, startCli, status, teardown, waitFor } from "./cli.js";

type Engine = Awaited<ReturnType<typeof status>>["engines"][number];

async function listen(port: number): Promise<net.Server> {
  const server = net.createServer((s) => s.destroy());
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen(port, "127.0.0.1", resolve));
  return server;
}

/** A dev root holding only the devices named (the fixture host's dev_root has them all). */
async function devRoot(devices: string[]): Promise<string> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-devroot-"));
  await fs.mkdir(path.join(root, "dev"));
  for (const d of devices) await fs.writeFile(path.join(root, d), "");
  return root;
}

const inspectFailures = (e: Engine) =>
  e.history.filter((h) => h.to === "failed" && (h.note ?? "").startsWith("inspect:")).length;
const runDirs = async (fleet: SimFleet, engine: string) =>
  (await fs.readdir(path.join(fleet.stateDir, "runs", engine)).catch(() => [])).filter((d) => !d.startsWith("."));

describe("failure classes on the native backend", () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const c of cleanup.reverse()) await c().catch(() => undefined);
  });

  it("watch mode outwaits a stranger on the planned port and a missing device past the attempt budget, then converges once both are gone", async () => {
    const root = await devRoot(["/dev/nvidia0"]); // /dev/nvidiactl is missing
    const fleet = await simFleet({ engines: [{}], devRoot: root });
    const stranger = await listen(fleet.ports[0]![0]!);
    cleanup.push(async () => stranger.close());
    const controller: ChildProcess = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir]);
    let log = "";
    controller.stderr!.on("data", (d) => (log += d));
    controller.stdout!.on("data", (d) => (log += d));
    cleanup.push(
      () => teardown(fleet.stateDir),
      async () => controller.exitCode === null && controller.kill("SIGKILL"),
    );

    const budget = Number(TEST_ENV.NARWHAL_RETRY_MAX_ATTEMPTS);
    // Either it re-checked twice the attempt budget, or it gave up (which it must not).
    const waiting = await waitFor("re-checks past the attempt budget, or a terminal failure", async () => {
      const [e] = (await status(fleet.stateDir)).engines;
      return e && e.phase === "failed" && (inspectFailures(e) > 2 * budget || e.retry_at === null) ? e : undefined;
    });
    expect(waiting.retry_at).not.toBeNull();
    expect(waiting.attempts).toBe(0);
    expect(waiting.last_error).toMatchObject({ step: "inspect", failure: "outwait", retryable: true });
    expect(waiting.last_error!.message).toContain(`port ${fleet.ports[0]![0]} (http) already has a listener`);
    expect(waiting.last_error!.message).toContain("device /dev/nvidiactl is missing");
    expect(log).toMatch(/outwaiting a cause outside narwhal's control since/);
    expect(await engineProcesses(fleet.stateDir)).toEqual([]);

    // The stranger leaves; the device is still missing: still outwaited, now for the device alone.
    await new Promise((r) => stranger.close(r));
    const deviceOnly = await waitFor("a re-check without the port", async () => {
      const [e] = (await status(fleet.stateDir)).engines;
      return e?.phase === "failed" && e.last_error && !e.last_error.message.includes("listener") ? e : undefined;
    });
    expect(deviceOnly.last_error).toMatchObject({ failure: "outwait", input: "launch.accelerator_devices[1]" });

    await fs.writeFile(path.join(root, "dev/nvidiactl"), "");
    const captured = await waitFor(
      "captured",
      async () => (await status(fleet.stateDir)).engines.find((e) => e.phase === "captured"),
      60_000,
    );
    expect(captured.attempts).toBe(0);
    expect(controller.exitCode).toBeNull(); // the same controller, never restarted
    expect((await engineProcesses(fleet.stateDir)).length).toBe(1);
    expect(await runDirs(fleet, "engine-1")).toHaveLength(1);
  });

  it("reconcile --once outwaits a stranger on the planned port up to NARWHAL_ONCE_OUTWAIT_MS, then exits 2 naming the bound", async () => {
    const fleet = await simFleet({ engines: [{}] });
    const stranger = await listen(fleet.ports[0]![0]!);
    cleanup.push(
      async () => stranger.close(),
      () => teardown(fleet.stateDir),
    );
    const started = Date.now();
    // 6 s: long enough for more inspections than the attempt budget even when one takes about a second
    // (a loaded two-core machine fitted only two into 3 s).
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
      NARWHAL_ONCE_OUTWAIT_MS: "6000",
    });
    const seconds = (Date.now() - started) / 1000;
    expect(r.code, r.stderr.slice(-2000)).toBe(2);
    expect(seconds).toBeGreaterThanOrEqual(6);
    const [e] = (await status(fleet.stateDir)).engines;
    expect(e).toMatchObject({
      phase: "failed",
      attempts: 0,
      retry_at: null,
      last_error: { step: "inspect", failure: "outwait" },
    });
    expect(e!.last_error!.message).toMatch(
      /already has a listener.*\(unchanged after outwaiting it for \d+ s, the bound of reconcile --once/s,
    );
    expect(inspectFailures(e!)).toBeGreaterThan(Number(TEST_ENV.NARWHAL_RETRY_MAX_ATTEMPTS));
  });

  it("a native interpreter that does not exist is terminal at once: one attempt, one run directory, the interpreter named", async () => {
    const fleet = await simFleet({ engines: [{}], python: "/nonexistent/narwhal/python3" });
    cleanup.push(() => teardown(fleet.stateDir));
    // A budget of five would have meant five runs of a check that cannot start.
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
      NARWHAL_RETRY_MAX_ATTEMPTS: "5",
    });
    expect(r.code, r.stderr.slice(-2000)).toBe(2);
    const [e] = (await status(fleet.stateDir)).engines;
    expect(e).toMatchObject({
      phase: "failed",
      attempts: 1,
      retry_at: null,
      last_error: { failure: "terminal", retryable: false, input: "/nonexistent/narwhal/python3" },
    });
    expect(e!.last_error!.message).toMatch(/ENOENT/);
    expect(e!.history.filter((h) => h.to === "failed")).toHaveLength(1);
    expect(await runDirs(fleet, "engine-1")).toHaveLength(1);
  });
});
