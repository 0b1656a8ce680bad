// `narwhal status` tells the truth end to end, with real simulator engines and
// the built CLI: a dead engine shows as gone when no controller runs, a pending
// desired edit shows as DESIRED ≠ APPLIED for exactly the edited engine, and a
// running (or SIGKILLed) controller is named by its pid.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { CLI, runCli, startCli, status, teardown, cliEnv, waitFor } from "./cli.js";
import { record, stateFile } from "../controller/records.js";
import type { StatusEngine, StatusView } from "../../src/cli/status-view.js";
import type { EngineRecord } from "../../src/state/store.js";

describe("status tells the truth", () => {
  let fleet: SimFleet;
  let controller: ChildProcess | null = null;

  beforeAll(async () => {
    fleet = await simFleet();
  });
  afterAll(async () => {
    controller?.kill("SIGKILL");
    await teardown(fleet.stateDir);
  });

  const text = async () => {
    const r = await runCli(["status", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout;
  };
  const row = (out: string, engine: string) => out.split("\n").find((l) => l.startsWith(`${engine} `)) ?? "";
  const byEngine = async () =>
    Object.fromEntries((await status(fleet.stateDir, fleet.dir)).engines.map((e) => [e.engine, e])) as Record<
      string,
      StatusEngine
    >;

  it("with no controller running, checks each engine and shows a killed one gone", async () => {
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    const before = await text();
    expect(before).toMatch(/^controller: not running \(state last written \d{4}-/m);
    expect(before).toContain("no controller is running; checked 2 engines just now");
    expect(row(before, "engine-1")).toMatch(/^engine-1 +captured +\S+ +alive /);

    // The controller recorded what status needs of desired/ (state/desired-summary.json), as status shows it.
    const summary = JSON.parse(await fs.readFile(path.join(fleet.stateDir, "desired-summary.json"), "utf8")) as {
      engines: Record<string, { input_hash: string }>;
    };
    const shown = await byEngine();
    for (const n of ["engine-1", "engine-2"])
      expect(summary.engines[n]!.input_hash).toBe(shown[n]!.desired_hash_now ?? "none shown");
    const { pid } = shown["engine-1"]!;
    process.kill(-pid!, "SIGKILL");
    const gone = await waitFor("engine-1 shown gone", async () => {
      const e = (await byEngine())["engine-1"]!;
      return e.live?.liveness === "gone" ? e : undefined;
    });
    expect(gone).toMatchObject({ phase: "captured", live: { liveness: "gone", problem: `pid ${pid} not running` } });
    const after = await text();
    expect(row(after, "engine-1")).toMatch(new RegExp(`^engine-1 +captured +\\S+ +gone: pid ${pid} not running `));
    expect(row(after, "engine-2")).toMatch(/^engine-2 +captured +\S+ +alive /);
    const detail = await runCli(["status", "engine-1", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(detail.stdout).toContain(`checked now:   gone: pid ${pid} not running`);
    expect(detail.stdout).toMatch(/^controller: not running/m);
  });

  it("shows DESIRED ≠ APPLIED for exactly the engine whose extra_args were edited, before any reconcile", async () => {
    const applied = await byEngine();
    await fleet.write({ engines: [{}, { extraArgs: ["--max-num-seqs", "64"] }] });
    const now = await byEngine();
    expect(now["engine-1"]!.desired_hash_now).toBe(applied["engine-1"]!.applied_hash);
    expect(now["engine-2"]!.desired_hash_now).not.toBe(now["engine-2"]!.applied_hash);
    for (const n of ["engine-1", "engine-2"]) {
      // Nothing was applied: APPLIED (and `desired_hash`, kept for compatibility) and RUNNING are unchanged.
      expect(now[n]).toMatchObject({
        applied_hash: applied[n]!.applied_hash,
        desired_hash: applied[n]!.applied_hash,
        running_hash: applied[n]!.running_hash,
      });
    }
    const cells = (line: string) => line.split(/ {2,}/);
    const out = await text();
    const [, , , , d1, a1] = cells(row(out, "engine-1")); // ENGINE PHASE AGE LIVE DESIRED APPLIED
    const [, , , , d2, a2] = cells(row(out, "engine-2"));
    expect(d1).toBe(a1);
    expect(d2).not.toBe(a2);
    expect(d2).toBe(now["engine-2"]!.desired_hash_now!.slice(0, 12));
  });

  it("says once that desired/ is invalid, shows ? for DESIRED and still shows what runs", async () => {
    const fleetFile = path.join(fleet.dir, "fleet.json");
    const good = await fs.readFile(fleetFile, "utf8");
    await fs.writeFile(fleetFile, "{ not json");
    try {
      const out = await text();
      expect(out.match(/is invalid \(\d+ errors?\): run narwhal validate/g)).toHaveLength(1);
      expect(row(out, "engine-2")).toMatch(/^engine-2 +captured +\S+ +alive +\? +[0-9a-f]{12} /);
      const json = await status(fleet.stateDir, fleet.dir);
      expect(json.desired).toMatchObject({ valid: false, engines: null });
      expect(json.engines.every((e) => e.desired_hash_now === null)).toBe(true);
    } finally {
      await fs.writeFile(fleetFile, good);
    }
  });

  it("with a controller watching, names its pid and checks nothing itself; a SIGKILLed controller is a stale lock", async () => {
    controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir]);
    const pid = controller.pid!;
    // It restarts the killed engine and applies the edit: converged when both run what desired/ says.
    await waitFor(
      "the watch controller converged",
      async () => {
        const e = Object.values(await byEngine());
        return e.length === 2 &&
          e.every((x) => x.phase === "captured" && x.running_hash === x.desired_hash_now && x.pid !== null)
          ? e
          : undefined;
      },
      150_000,
    );
    const json = await status(fleet.stateDir, fleet.dir);
    expect(json.controller).toMatchObject({ running: true, stale: false, holder: { pid, host: os.hostname() } });
    expect(json.checked).toBeNull();
    expect(json.engines.every((e) => e.live === null)).toBe(true);
    const out = await text();
    expect(out).toMatch(new RegExp(`^controller: running, pid ${pid} on host ${os.hostname()} since \\d{4}-`, "m"));
    expect(out).not.toContain("checked");

    controller.kill("SIGKILL");
    await new Promise((r) => controller!.once("exit", r));
    controller = null;
    const stale = await text();
    expect(stale).toMatch(new RegExp(`^controller: not running \\(stale lock of pid ${pid} on host `, "m"));
    expect(stale).toContain("no controller is running; checked 2 engines just now");
    expect(row(stale, "engine-1")).toMatch(/^engine-1 +captured +\S+ +alive /);
  });

  it("loads no dockerode, for native records or container ones (their list is narwhal's own HTTP request)", async () => {
    // Preloaded into the CLI: at exit, says whether any dockerode module was loaded (import or require): the
    // bundle's copy (scripts/bundle.mjs) or the package.
    const preload = path.join(path.dirname(fleet.stateDir), "report-dockerode.cjs");
    await fs.writeFile(
      preload,
      'process.on("exit", () => { if (Object.keys(require.cache).some((k) => k.includes("/node_modules/dockerode/") || k.endsWith("/dist/bundle/dockerode.cjs"))) require("fs").writeSync(2, "LOADED dockerode\\n"); });\n',
    );
    const run = (stateDir: string) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const args = [
          "--require",
          preload,
          CLI,
          "status",
          "--desired",
          fleet.dir,
          "--state",
          stateDir,
          "--format",
          "json",
        ];
        const child = spawn(process.execPath, args, {
          env: cliEnv(),
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (d) => (stdout += d));
        child.stderr.on("data", (d) => (stderr += d));
        child.on("close", (code) => resolve({ code, stdout, stderr }));
      });
    const stateWith = async (name: string, records: EngineRecord[]) => {
      const dir = path.join(path.dirname(fleet.stateDir), name);
      await fs.mkdir(dir, { recursive: true });
      await fs.writeFile(path.join(dir, "narwhal.json"), JSON.stringify(stateFile(records)));
      return dir;
    };
    const native = await run(await stateWith("state-native", [record("engine-1"), record("engine-2")]));
    expect(native.code, native.stderr).toBe(0);
    expect((JSON.parse(native.stdout) as StatusView).checked?.engines).toBe(2);
    expect(native.stderr).not.toContain("LOADED dockerode");

    const handle = {
      kind: "container" as const,
      container_id: "c0ffee",
      launch_token: "t",
      docker_host: "unix:///nonexistent/docker.sock",
    };
    const container = await run(
      await stateWith("state-container", [record("engine-1", { backend: "container", handle }), record("engine-2")]),
    );
    expect(container.code, container.stderr).toBe(0);
    expect(container.stderr).not.toContain("LOADED dockerode");
    const [e] = (JSON.parse(container.stdout) as StatusView).engines;
    expect(e!.live).toMatchObject({
      liveness: "unknown",
      problem: expect.stringContaining("unix:///nonexistent/docker.sock"),
    });
  });

  it("shows when the controller last observed each engine", async () => {
    const e = Object.values(await byEngine());
    expect(e.every((x) => x.observed_at !== null)).toBe(true);
    expect(row(await text(), "engine-1")).toMatch(/ \d+s ago /);
  });
});
