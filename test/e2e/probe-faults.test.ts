// The probe's and capture's refusals on one running engine (seed 000 "Prove the live
// HTTP process", "capture-cache checks container identity"): the simulator's
// per-request switches (NARWHAL_SIM_FAULTS_FILE, test/sim/README.md) make the
// same process answer as a wrong one would — /health not 200, another model, an
// empty completion, another process's start time, another API version — and each
// probe fails naming the engine, the step, the input and the fix. Capture refuses
// an engine that is not its plan's: another run's engine, and a process with no
// launch token. One prepared run serves every case.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NativeBackend, PROCESS_FILE } from "../../src/backends/native.js";
import { NodeHosts } from "../../src/hosts/node-hosts.js";
import { readPlan } from "../../src/phases/prepare.js";
import { probe } from "../../src/phases/probe.js";
import { capture } from "../../src/phases/capture.js";
import type { EngineHandle, PreparedRun } from "../../src/phases/types.js";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { runCli, teardown } from "./cli.js";

const CLIENT_ENV = { PATH: "/usr/local/bin:/usr/bin:/bin" };

let fleet: SimFleet;
let faultsFile: string;
let hosts: NodeHosts;
let backend: NativeBackend;
let a: PreparedRun;
let b: PreparedRun;
let handle: EngineHandle;
let stranger: ChildProcess | undefined;
const signal = new AbortController().signal;

const engineCli = (args: string[]) => runCli(["engine", ...args, "--state", fleet.stateDir, "--format", "json"]);

/** `narwhal engine prepare` + `check` into runs/engine-1/NAME, as the PreparedRun the controller would hold. */
async function prepared(name: string): Promise<PreparedRun> {
  const dir = path.join(fleet.stateDir, "runs", "engine-1", name);
  const p = await engineCli(["prepare", "--desired", fleet.dir, "--engine", "engine-1", "--out", dir]);
  expect(p.code, p.stderr).toBe(0);
  const c = await engineCli(["check", "--run", dir]);
  expect(c.code, c.stderr).toBe(0);
  const { plan, sha256 } = await readPlan(dir);
  return { engine: "engine-1", dir, input_hash: name, plan_sha256: sha256, launch_token: plan.launch_token };
}

describe("probe and capture refuse what is not the planned engine", () => {
  beforeAll(async () => {
    // Under this test's own temp dir (absent until a case writes it: a missing file holds no switches).
    faultsFile = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-probe-faults-")), "sim-faults");
    fleet = await simFleet({ readySeconds: 30, engines: [{ environment: { NARWHAL_SIM_FAULTS_FILE: faultsFile } }] });
    // Both plans are prepared before anything listens: inspection checks the planned ports are free.
    a = await prepared("a");
    b = await prepared("b");
    const started = await engineCli(["start", "--run", a.dir]);
    expect(started.code, started.stderr).toBe(0);
    handle = JSON.parse(await fs.readFile(path.join(a.dir, PROCESS_FILE), "utf8")) as EngineHandle;
    hosts = new NodeHosts({ stateDir: fleet.stateDir, clientEnv: CLIENT_ENV, roleShell: true });
    backend = new NativeBackend({ stateDir: fleet.stateDir, hostEnv: CLIENT_ENV, logCapBytes: 1 << 20, hosts });
  });
  afterAll(async () => {
    stranger?.kill("SIGKILL");
    await hosts?.close();
    if (fleet) await teardown(fleet.stateDir);
    if (faultsFile) await fs.rm(path.dirname(faultsFile), { recursive: true, force: true });
  });

  it("the engine passes the probe with no switch set (so each failure below is its switch's)", async () => {
    const result = await probe(a, { backend, handle, signal });
    expect(result.models).toContain("tiny-llama");
    expect(result.completion_text).not.toBe("");
  });

  it("checked.json ties the API version to the plan's sha256 and the runtime's image ID, the one inspection saw", async () => {
    const checked = JSON.parse(await fs.readFile(path.join(a.dir, "checked.json"), "utf8"));
    const { plan } = await readPlan(a.dir);
    const observed = JSON.parse(await fs.readFile(path.join(a.dir, "engine-runtime.json"), "utf8"));
    // A native runtime's image ID is narwhal's runtime identity: "native:sha256:" over the interpreter and its packages.
    expect(checked.image_id).toMatch(/^native:sha256:[0-9a-f]{64}$/);
    expect(checked).toMatchObject({ plan_sha256: a.plan_sha256, vllm_api_version: "0.11.0" });
    expect(checked.image_id).toBe(plan.runtime_identity);
    expect(checked.image_id).toBe(observed.image_id);
    // Another run of the same desired inputs, checked on the same runtime: the same image ID, another plan sha256.
    const other = JSON.parse(await fs.readFile(path.join(b.dir, "checked.json"), "utf8"));
    expect(other.image_id).toBe(checked.image_id);
    expect(other.plan_sha256).toBe(b.plan_sha256);
    expect(other.plan_sha256).not.toBe(checked.plan_sha256);
  });

  const cases = [
    {
      name: "/health answers 500",
      faults: "health_status=500",
      error: {
        // The passing probe above took health.txt: a repeat captures under a fresh name.
        message: expect.stringMatching(/^\/health answered HTTP 500 \(captured in health\.\d+\.txt\)$/),
        input: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        fix: "Read the capture and the engine log.",
        retryable: true,
      },
    },
    {
      name: "/v1/models without the served model name",
      faults: "served_model_name=other-model",
      error: {
        message: '/v1/models lists ["other-model"], not the configured model "tiny-llama"',
        input: "NARWHAL_ENGINE_MODEL_NAME",
        fix: expect.stringMatching(/which process owns the endpoint and its --served-model-name/),
        retryable: false,
      },
    },
    {
      name: "another process's process_start_time_seconds in /metrics",
      faults: "start_time_offset=3600",
      error: {
        message: expect.stringMatching(
          /^the process answering http:\S+ started at [\d.e+]+, but the recorded engine started at [\d.]+$/,
        ),
        fix: expect.stringMatching(/^Another process owns the endpoint: find and stop it/),
        retryable: false,
      },
    },
    {
      name: "an empty completion text",
      faults: "empty_completion",
      error: {
        message: "the deterministic completion returned no text",
        input: "/v1/completions",
        fix: "Read completion.json and the engine log.",
        retryable: true,
      },
    },
    {
      name: "another API version",
      faults: "wrong_version=0.10.2",
      error: {
        message: expect.stringMatching(/^\/version returned "0\.10\.2"; checked image expects "0\.11\.0"$/),
        fix: expect.stringMatching(
          /^First check which process owns the endpoint and compare it with the recorded image and process identity/,
        ),
        retryable: false,
      },
    },
  ];
  for (const c of cases) {
    it(`fails the probe on ${c.name}, naming the engine, the step, the input and the fix`, async () => {
      await fs.writeFile(faultsFile, c.faults);
      try {
        await expect(probe(a, { backend, handle, signal })).rejects.toMatchObject({
          name: "PhaseError",
          engine: "engine-1",
          step: "probe",
          ...c.error,
        });
      } finally {
        await fs.rm(faultsFile, { force: true });
      }
    });
  }

  it("capture refuses another run's engine, by its record and by the process's own launch token", async () => {
    const opts = { backend, groupSignature: "probe-faults", signal };
    await expect(capture(b, { ...opts, handle })).rejects.toMatchObject({
      step: "capture",
      message: "the recorded engine was not started from this plan",
      input: "launch token",
      retryable: false,
    });
    // A record that claims B's token for A's process: the process's environment says otherwise.
    await expect(capture(b, { ...opts, handle: { ...handle, launch_token: b.launch_token } })).rejects.toMatchObject({
      step: "capture",
      message: expect.stringContaining(`carries launch token ${a.launch_token}, not this plan's`),
      input: "engine identity",
      retryable: true,
    });
    await expect(fs.access(path.join(b.dir, "cache-layout.json"))).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("capture refuses a process with no launch token recorded as the plan's engine", async () => {
    stranger = spawn("sleep", ["600"], { detached: true, stdio: "ignore" });
    const pid = stranger.pid!;
    // Field 22 of /proc/PID/stat (after the parenthesised command): the start tick narwhal records.
    const stat = await fs.readFile(`/proc/${pid}/stat`, "utf8");
    const startTicks = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
    const forged: EngineHandle = { ...handle, kind: "native", pid, pgid: pid, start_ticks: startTicks } as EngineHandle;
    await expect(capture(a, { backend, handle: forged, groupSignature: "probe-faults", signal })).rejects.toMatchObject(
      {
        step: "capture",
        message: `the running engine is not this plan's: process ${pid} carries launch token none, not this plan's; process ${pid} belongs to no engine`,
        input: "engine identity",
      },
    );
    await expect(fs.access(path.join(a.dir, "cache-layout.json"))).rejects.toMatchObject({ code: "ENOENT" });
  });
});
