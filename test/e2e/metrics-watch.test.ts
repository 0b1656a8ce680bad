// Watch mode with --metrics-address: converges two simulator engines, then a
// scrape of /metrics parses as the Prometheus text format (strictly: malformed
// output fails the test) and counts both engines captured, their transitions
// and their step durations; /healthz answers 200 while the loop runs; SIGTERM
// closes the port and leaves the engines running.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, startCli, status, teardown, waitFor } from "./cli.js";
import { parseExposition, sampleValue } from "../metrics/prom-text.js";

describe("reconcile (watch mode) serving metrics", () => {
  let fleet: SimFleet;
  let controller: ChildProcess;
  let log = "";

  beforeAll(async () => {
    fleet = await simFleet();
    // Port 0: the kernel chooses a free port, and the controller's log names it.
    controller = startCli([
      "reconcile",
      "--desired",
      fleet.dir,
      "--state",
      fleet.stateDir,
      "--metrics-address",
      "127.0.0.1:0",
    ]);
    controller.stdout!.on("data", (d) => (log += d));
    controller.stderr!.on("data", (d) => (log += d));
  });
  afterAll(async () => {
    if (controller.exitCode === null) controller.kill("SIGKILL");
    await teardown(fleet.stateDir);
  });

  const base = () =>
    waitFor("the metrics address in the log", async () => /metrics served at (\S+)\/metrics/.exec(log)?.[1]);
  const scrape = async () => {
    const res = await fetch(`${await base()}/metrics`);
    expect(res.status).toBe(200);
    return parseExposition(await res.text());
  };

  it("counts the converged engines by phase, their transitions and their steps", async () => {
    await waitFor("both captured", async () => {
      const e = (await status(fleet.stateDir)).engines;
      return e.length === 2 && e.every((x) => x.phase === "captured");
    });
    // The gauges are read from the controller's state at each scrape; the transition into captured
    // is counted once it is persisted, which status just read.
    const f = await waitFor("captured counted", async () => {
      const f = await scrape();
      return sampleValue(f, "narwhal_engines", { phase: "captured" }) === 2 ? f : undefined;
    });
    expect(sampleValue(f, "narwhal_engines", { phase: "failed" })).toBe(0);
    expect(sampleValue(f, "narwhal_transitions_total", { from: "probed", to: "captured" })).toBe(2);
    expect(sampleValue(f, "narwhal_engine_conditions", { type: "Ready", status: "True" })).toBe(2);
    for (const step of ["inspect", "prepare", "check", "start", "probe", "capture"]) {
      expect(sampleValue(f, "narwhal_step_duration_seconds_count", { step, result: "ok" }), step).toBe(2);
      expect(sampleValue(f, "narwhal_step_duration_seconds_sum", { step, result: "ok" }), step).toBeGreaterThan(0);
    }
    expect(sampleValue(f, "narwhal_reconcile_duration_seconds_count", { kind: "fleet", result: "ok" })).toBeGreaterThan(
      0,
    );
    expect(sampleValue(f, "narwhal_state_write_duration_seconds_count", { result: "ok" })).toBeGreaterThan(0);
    expect(sampleValue(f, "narwhal_work_queue_depth", { state: "running" })).toBeDefined();
  });

  it("answers /healthz 200 while the controller loop runs", async () => {
    const res = await fetch(`${await base()}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/^ok: the last reconcile loop ended \d+ s ago/);
  });

  it("closes the port on SIGTERM and leaves the engines running", async () => {
    const url = await base();
    const running = await engineProcesses(fleet.stateDir);
    controller.kill("SIGTERM");
    expect(await new Promise((r) => controller.once("exit", r))).toBe(0);
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
    expect((await engineProcesses(fleet.stateDir)).map((p) => p.pid).sort()).toEqual(running.map((p) => p.pid).sort());
  });
});
