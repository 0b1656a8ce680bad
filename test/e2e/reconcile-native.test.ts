// The reconciler end to end on the native backend: real simulator processes,
// real ports, real files, the built CLI as a separate process.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, runCli, startCli, status, teardown } from "./cli.js";
import { readState } from "../../src/state/store.js";

const RUN_FILES = [
  "launch.json",
  "engine.env",
  "checked.json",
  "runtime-check.log",
  "health.txt",
  "version.json",
  "models.json",
  "metrics.txt",
  "completion.json",
  "cache-layout.json",
  "probed.json",
  "native-process.json",
  "engine.log",
];

describe("reconcile --once on the native backend", () => {
  let fleet: SimFleet;
  let firstRuns: Record<string, string>;
  let firstPids: Record<string, number>;

  beforeAll(async () => {
    // This file is about what a change replaces. Its one-engine runtime edits put prefill and decode in two
    // groups (the runtime record feeds the signature, seed 000), where KV proofs would rightly find no pair:
    // proofs are test/e2e/kv-pairs.test.ts's.
    fleet = await simFleet({ kvTransfer: { prove: false } });
  });
  afterAll(async () => {
    await teardown(fleet.stateDir);
  });

  const once = () => runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
  const byEngine = async () => Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, e]));

  it("brings both engines to captured from cold and exits 0", async () => {
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    const engines = await byEngine();
    expect(Object.keys(engines).sort()).toEqual(["engine-1", "engine-2"]);
    for (const e of Object.values(engines)) {
      expect(e.phase).toBe("captured");
      expect(e.running_hash).toBe(e.desired_hash);
      expect(Object.fromEntries(e.conditions.map((c) => [c.type, `${c.status}/${c.reason}`]))).toEqual({
        Ready: "True/Captured",
        UpToDate: "True/HashMatches",
        Failed: "False/NoFailure",
      });
      expect(e.group_signature).toMatch(/^[0-9a-f]{16}$/);
      expect(e.pid).toBeGreaterThan(0);
      const files = await fs.readdir(e.run_dir!);
      for (const f of RUN_FILES) expect(files, `${e.engine} ${f}`).toContain(f);
      expect((await fs.stat(path.join(e.run_dir!, "engine.env"))).mode & 0o777).toBe(0o600);
      const layout = JSON.parse(await fs.readFile(path.join(e.run_dir!, "cache-layout.json"), "utf8"));
      expect(layout.num_gpu_blocks).toBeGreaterThan(0);
      expect(layout.gpu_kv_cache_tokens).toBe(layout.num_gpu_blocks * layout.block_size);
    }
    // Both engines share image, model, accelerator and TP: one group, representative engine-1.
    expect(engines["engine-1"]!.group_signature).toBe(engines["engine-2"]!.group_signature);
    const groups = await runCli(["groups", "--state", fleet.stateDir]);
    expect(groups.stdout.trim()).toBe(
      `${engines["engine-1"]!.group_signature}: representative=engine-1; roles=engine-1,engine-2`,
    );
    // The API key never reaches the state file or the plan.
    const stateText = await fs.readFile(path.join(fleet.stateDir, "narwhal.json"), "utf8");
    expect(stateText).not.toContain("e2e-key-0123456789");
    expect(await fs.readFile(path.join(engines["engine-1"]!.run_dir!, "launch.json"), "utf8")).not.toContain(
      "e2e-key-0123456789",
    );
    expect((await engineProcesses(fleet.stateDir)).length).toBe(2);
    firstRuns = Object.fromEntries(Object.values(engines).map((e) => [e.engine, e.run_dir!]));
    firstPids = Object.fromEntries(Object.values(engines).map((e) => [e.engine, e.pid!]));
  });

  it("changes nothing on a second run, in one state write", async () => {
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
      NARWHAL_LOG_LEVEL: "debug",
    });
    expect(r.code, r.stderr).toBe(0);
    // One write, not one per engine (N + 2 before, issue 14 item 2): the observation marking every engine
    // observed. The restored captured actors are not even started (nothing to do: no first snapshot to
    // compare with its record, 2 "unchanged not written" before); the next test's edit starts one.
    expect(r.stderr).toMatch(/state: 1 write, 0 unchanged not written/);
    // One fleet plan: an engine restored in the phase its record holds is no transition, so it asks for none
    // (every restored engine planned the fleet again before: N plans of O(engines + pairs) each).
    expect(r.stderr).toMatch(/fleet planned 1 time\b/);
    // What it restored, in one line: not a line per engine (1000 of them at 1000 engines).
    expect(r.stderr).toMatch(/info {2}restored 2 engines from the state: 2 captured\n/);
    expect(r.stderr).not.toMatch(/info {2}\[engine-\d\] \(restored\)/);
    const engines = await byEngine();
    for (const name of ["engine-1", "engine-2"]) {
      expect(engines[name]!.run_dir).toBe(firstRuns[name]);
      expect(engines[name]!.pid).toBe(firstPids[name]);
    }
    expect((await engineProcesses(fleet.stateDir)).length).toBe(2);
  });

  it("re-prepares and replaces only the engine whose extra_args changed", async () => {
    await fleet.write({ engines: [{}, { extraArgs: ["--max-num-seqs", "64"] }] });
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    const engines = await byEngine();
    expect(engines["engine-1"]!.run_dir).toBe(firstRuns["engine-1"]);
    expect(engines["engine-1"]!.pid).toBe(firstPids["engine-1"]);
    expect(engines["engine-2"]!.run_dir).not.toBe(firstRuns["engine-2"]);
    expect(engines["engine-2"]!.pid).not.toBe(firstPids["engine-2"]);
    expect(engines["engine-2"]!.history.map((h) => h.to)).toContain("replacing");
    const plan = JSON.parse(await fs.readFile(path.join(engines["engine-2"]!.run_dir!, "launch.json"), "utf8"));
    expect(plan.command).toEqual(expect.arrayContaining(["--max-num-seqs", "64"]));
    const procs = await engineProcesses(fleet.stateDir);
    expect(procs.map((p) => p.engine).sort()).toEqual(["engine-1", "engine-2"]);
    firstRuns["engine-2"] = engines["engine-2"]!.run_dir!;
    firstPids["engine-2"] = engines["engine-2"]!.pid!;
  });

  it("rejects an invalid edit with every error and leaves running engines untouched", async () => {
    const launchFile = path.join(fleet.dir, "engine-launch.json");
    const launch = JSON.parse(await fs.readFile(launchFile, "utf8"));
    const before = await fs.readFile(path.join(fleet.stateDir, "narwhal.json"), "utf8");
    launch.engines["engine-1"].tensor_parallel_size = 2; // TP ≠ len(gpu_ids)
    launch.engines["engine-2"].runtime.extra_args = ["--port", "9999"]; // launcher-managed flag
    launch.engines["engine-2"].gpu_ids = ["0"]; // collides with engine-1 on this host
    await fs.writeFile(launchFile, JSON.stringify(launch));
    const r = await once();
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("engine-launch.json");
    expect(r.stderr).toMatch(/tensor_parallel_size/);
    expect(r.stderr).toMatch(/--port/);
    expect(r.stderr).toMatch(/gpu_ids/);
    expect(await fs.readFile(path.join(fleet.stateDir, "narwhal.json"), "utf8")).toBe(before);
    const procs = await engineProcesses(fleet.stateDir);
    expect(procs.map((p) => p.pid).sort()).toEqual(Object.values(firstPids).sort());
    await fleet.write({ engines: [{}, { extraArgs: ["--max-num-seqs", "64"] }] });
  });

  it("resumes after SIGKILL of the controller mid-start with exactly one process per engine", async () => {
    // Force a fresh start of both engines, then kill the controller mid-start: SIGKILL as soon as it has
    // spawned the first new engine, before that start is recorded. (Polling the state for an engine in
    // checked/started missed the window, under 200 ms on a fast machine, and waited out its 60 s.)
    await fleet.write({ engines: [{ extraArgs: ["--max-num-seqs", "32"] }, { extraArgs: ["--max-num-seqs", "48"] }] });
    const child = startCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
      NARWHAL_FAILPOINTS: "native:spawn:after@1",
    });
    const [, signal] = (await new Promise((r) => child.once("close", (...a) => r(a)))) as [
      number | null,
      string | null,
    ];
    expect(signal).toBe("SIGKILL");
    const midStart = await readState(fleet.stateDir);
    expect(Object.values(midStart.engines).some((e) => e.phase === "checked")).toBe(true);
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    const procs = await engineProcesses(fleet.stateDir);
    expect(procs.map((p) => p.engine).sort()).toEqual(["engine-1", "engine-2"]);
    const engines = await byEngine();
    for (const p of procs) expect(engines[p.engine]!.pid).toBe(p.pid);
  });

  // Issue 8 item 10: the check parses the whole serving command with the runtime's vLLM parser.
  it("fails a flag the runtime's vLLM rejects at check, once, while the engine it would replace keeps serving", async () => {
    const before = await byEngine();
    const procsBefore = await engineProcesses(fleet.stateDir);
    await fleet.write({
      engines: [{ extraArgs: ["--max-num-seqs", "32"] }, { extraArgs: ["--max-num-seqs", "48", "--bogus-flag"] }],
    });
    const r = await once();
    expect(r.code, r.stderr).toBe(2);
    const e = (await byEngine())["engine-2"]!;
    expect(e.phase).toBe("failed");
    expect(e.last_error).toMatchObject({ step: "check", input: "runtime.extra_args", retryable: false });
    expect(e.last_error!.message).toMatch(/rejects the serving command: unrecognized arguments: --bogus-flag/);
    expect(e.last_error!.fix).toMatch(/Remove or correct --bogus-flag in runtime\.extra_args/);
    // Nothing was stopped or started: the same processes, and the old engine still answers.
    expect(await engineProcesses(fleet.stateDir)).toEqual(procsBefore);
    expect((await fetch(`http://127.0.0.1:${fleet.ports[1]![0]}/health`)).status).toBe(200);
    expect((await byEngine())["engine-1"]!.pid).toBe(before["engine-1"]!.pid);
    // status names the engine still serving the old inputs, and says it serves them.
    expect(e).toMatchObject({ pid: before["engine-2"]!.pid, retiring: true });
    expect(Object.fromEntries(e.conditions.map((c) => [c.type, `${c.status}/${c.reason}`]))).toMatchObject({
      UpToDate: "False/HashDiffers",
      Failed: "True/Terminal",
    });
    const since = e.history.slice(before["engine-2"]!.history.length).map((h) => h.to);
    expect(since).not.toContain("replacing");
    expect(since).not.toContain("checked");
    // The run holds one check attempt and no checked.json; a rerun from the same inputs fails the same way.
    expect(await fs.readdir(e.run_dir!)).not.toContain("checked.json");
    const log = await fs.readFile(path.join(e.run_dir!, "runtime-check.log"), "utf8");
    expect(log.match(/^=== inspection /gm)).toHaveLength(1);
    expect((await once()).code).toBe(2);
    expect(await engineProcesses(fleet.stateDir)).toEqual(procsBefore);
    // Correcting the edit back to what runs keeps the serving engine: no restart.
    await fleet.write({ engines: [{ extraArgs: ["--max-num-seqs", "32"] }, { extraArgs: ["--max-num-seqs", "48"] }] });
    const fixed = await once();
    expect(fixed.code, fixed.stderr).toBe(0);
    expect(await engineProcesses(fleet.stateDir)).toEqual(procsBefore);
    expect((await byEngine())["engine-2"]!.phase).toBe("captured");
  });
});

describe("simulator faults end in failed with the step and the cause", () => {
  const cases = [
    // A probe or capture failure leaves the engine running from the desired inputs; a failed start leaves nothing running.
    { fault: "wrong_version", step: "probe", cause: /\/version returned/, upToDate: "True/HashMatches" },
    // Seed 000 PY_ENGINE: the process answering must be identifiable by process_start_time_seconds.
    {
      fault: "missing_metric=process_start_time_seconds",
      step: "probe",
      cause: /no process_start_time_seconds/,
      upToDate: "True/HashMatches",
    },
    {
      fault: "crash_at_start",
      step: "start",
      cause: /exited during startup|failed on its accelerator/,
      upToDate: "False/NotRunning",
    },
    {
      fault: "missing_metric=vllm:cache_config_info",
      step: "capture",
      cause: /vllm:cache_config_info/,
      upToDate: "True/HashMatches",
    },
  ];
  for (const c of cases) {
    it(`${c.fault} → failed at ${c.step}`, async () => {
      const fleet = await simFleet({ engines: [{ faults: c.fault }] });
      try {
        const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
        expect(r.code, r.stderr).toBe(2);
        const [e] = (await status(fleet.stateDir)).engines;
        expect(e!.phase).toBe("failed");
        expect(e!.last_error!.step).toBe(c.step);
        expect(e!.last_error!.message).toMatch(c.cause);
        const conditions = Object.fromEntries(e!.conditions.map((x) => [x.type, `${x.status}/${x.reason}`]));
        expect(conditions).toEqual({ Ready: "False/Failed", UpToDate: c.upToDate, Failed: "True/Terminal" });
        expect(e!.history.map((h) => h.to)).toContain("failed");
      } finally {
        await teardown(fleet.stateDir);
      }
    });
  }
});
