// Seed 000's own Python snippets (PY_LAUNCH, PY_DEVICES, PY_CACHE_GROUPS, PY_ENGINE), taken
// from the seed file unchanged (seed-snippets.ts), run with /usr/bin/python3 against the files
// narwhal writes for a converged simulated fleet: the role-specific launch record of each run
// (engine-launch.json), the runtime observation it names (engine-runtime.json), the fleet-wide
// <state>/engine-launch.local.json, and a run's launch.json + checked.json.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { HOST_FIXTURE, simFleet, type SimFleet } from "./sim-fleet.js";
import { runCli, status, teardown } from "./cli.js";
import { runSnippet } from "./seed-snippets.js";
import { pythonJsonDumps } from "../../src/desired/python-json.js";
import type { LaunchPlan } from "../../src/phases/plan.js";
import type { CheckResult, Inspection } from "../../src/phases/types.js";
import type { SeedLaunchRecord, SeedRuntimeObservation } from "../../src/phases/seed-records.js";

const PY_LAUNCH_FIELDS = [
  "role",
  "accelerator",
  "gpu_ids",
  "tensor_parallel_size",
  "accelerator_devices",
  "network_mode",
  "transfer",
  "environment",
  "vllm_args",
] as const;

const readJson = async <T>(file: string) => JSON.parse(await fs.readFile(file, "utf8")) as T;
const modeOf = async (file: string) => (await fs.stat(file)).mode & 0o777;

/** PY_DEVICES sees `devDir` as /dev: a private mount namespace (unshare -m, as root) with it bind-mounted there. */
const withDev = (devDir: string) => ["unshare", "-m", "--", "sh", "-c", 'mount --bind "$0" /dev && exec "$@"', devDir];

describe("seed 000's snippets on narwhal's files", () => {
  let fleet: SimFleet;
  let runs: Record<string, string>;
  const engine1 = (seqs: string) => ({ extraArgs: ["--max-num-seqs", seqs] });
  const converge = async () => {
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    runs = Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, e.run_dir!]));
  };
  const fleetFile = () => path.join(fleet.stateDir, "engine-launch.local.json");
  const groupsBoth = async () => {
    const seed = await runSnippet("PY_CACHE_GROUPS", { NARWHAL_LAUNCH_CONFIG: fleetFile() });
    expect(seed.code, seed.stderr).toBe(0);
    const narwhal = await runCli(["groups", "--state", fleet.stateDir]);
    expect(narwhal.code, narwhal.stderr).toBe(0);
    return { seed: seed.stdout.trimEnd(), narwhal: narwhal.stdout.trimEnd() };
  };

  beforeAll(async () => {
    // engine-1's own extra_args give it a group of its own (seed 000), engine-2 and engine-3 share one:
    // two groups, so the fleet does not prove KV pairs (about records, not KV).
    fleet = await simFleet({ engines: [engine1("8"), {}, {}], kvTransfer: { prove: false } });
    await converge();
  });
  afterAll(async () => {
    await teardown(fleet.stateDir);
  });

  it("PY_LAUNCH prints the role-specific record prepare wrote (0600), and that record is the plan's", async () => {
    for (const [engine, run] of Object.entries(runs)) {
      const file = path.join(run, "engine-launch.json");
      const record = await readJson<SeedLaunchRecord>(file);
      const r = await runSnippet("PY_LAUNCH", { NARWHAL_ENGINE_LAUNCH_CONFIG: file });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe(PY_LAUNCH_FIELDS.map((f) => `${f}: ${pythonJsonDumps(record[f])}\n`).join(""));

      // What it says is what the plan launches with (seed 003 §15: the derived environment and vllm_args).
      const plan = await readJson<LaunchPlan>(path.join(run, "launch.json"));
      expect(plan.engine).toBe(engine);
      expect(record.role).toBe(plan.role);
      expect(record.gpu_ids).toEqual(plan.gpu.ids);
      expect(record.environment).toEqual({
        CUDA_VISIBLE_DEVICES: plan.environment["CUDA_VISIBLE_DEVICES"],
        UCX_NET_DEVICES: plan.environment["UCX_NET_DEVICES"],
      });
      expect(record.environment["UCX_NET_DEVICES"]).toBe("lo");
      expect(record.vllm_args).toEqual(["--tensor-parallel-size", String(plan.gpu.tensor_parallel_size)]);
      expect(plan.command.join(" ")).toContain(record.vllm_args.join(" "));
      expect([...record.accelerator_devices, ...record.transfer.devices]).toEqual(plan.devices);

      // sources: the runtime observation and the inspection it was derived from, beside it; mode 0600.
      expect(record.sources).toMatchObject({ runtime: "engine-runtime.json", inspection: "inspection.json" });
      const runtime = await readJson<SeedRuntimeObservation>(path.join(run, record.sources["runtime"]!));
      expect(runtime).toMatchObject({
        engine,
        image_id: plan.runtime_identity,
        model_sha256: plan.model.config_sha256,
        group_signature: plan.group_signature,
      });
      expect(await modeOf(file)).toBe(0o600);
      expect(await modeOf(path.join(run, "engine-runtime.json"))).toBe(0o600);
    }
  });

  it("PY_DEVICES finds every declared path on the node's device tree, and names a missing one", async () => {
    const devDir = path.join(HOST_FIXTURE, "dev");
    for (const run of Object.values(runs)) {
      const config = { NARWHAL_ENGINE_LAUNCH_CONFIG: path.join(run, "engine-launch.json") };
      const r = await runSnippet("PY_DEVICES", config, { wrap: withDev(devDir) });
      expect(r.code, r.stderr).toBe(0);
      // The same paths narwhal's inspection found present.
      const inspection = await readJson<Inspection>(path.join(run, "inspection.json"));
      expect(r.stdout).toBe(
        inspection.devices.map((d) => `${d.path}: ${d.present ? "present" : "missing"}\n`).join(""),
      );
      expect(inspection.devices.every((d) => d.present)).toBe(true);
    }

    // The host loses /dev/nvidia1 after preparation: engine-2's record (gpu 1) no longer holds.
    const lost = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-dev-"));
    try {
      await fs.cp(devDir, lost, { recursive: true });
      await fs.rm(path.join(lost, "nvidia1"));
      const config = { NARWHAL_ENGINE_LAUNCH_CONFIG: path.join(runs["engine-2"]!, "engine-launch.json") };
      const r = await runSnippet("PY_DEVICES", config, { wrap: withDev(lost) });
      expect(r.code).toBe(1);
      expect(r.stdout).toContain("/dev/nvidia1: missing\n");
      expect(r.stdout).toContain("/dev/nvidiactl: present\n");
      expect(r.stderr.trim()).toBe("Restore the declared device exposure before launch.");
    } finally {
      await fs.rm(lost, { recursive: true, force: true });
    }
  });

  it("PY_CACHE_GROUPS on <state>/engine-launch.local.json prints what `narwhal groups` prints", async () => {
    const launches = (await readJson<{ engines: Record<string, SeedLaunchRecord> }>(fleetFile())).engines;
    expect(Object.keys(launches)).toEqual(["engine-1", "engine-2", "engine-3"]);
    for (const [engine, launch] of Object.entries(launches))
      expect(launch.sources["runtime"]).toBe(path.join(runs[engine]!, "engine-runtime.json"));
    expect(await modeOf(fleetFile())).toBe(0o600);

    const { seed, narwhal } = await groupsBoth();
    expect(seed).toBe(narwhal);
    const lines = seed.split("\n");
    expect(lines).toHaveLength(2);
    expect(lines.filter((l) => l.endsWith(": representative=engine-2; roles=engine-2,engine-3"))).toHaveLength(1);
  });

  it("PY_ENGINE proves a live engine from a copy of its run's launch.json and checked.json", async () => {
    const run = runs["engine-2"]!;
    // The seed's captures are exclusive (open "xb"): a fresh directory, not narwhal's own probed run.
    const fresh = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-engine-run-"));
    try {
      for (const f of ["launch.json", "checked.json"]) await fs.copyFile(path.join(run, f), path.join(fresh, f));
      const r = await runSnippet("PY_ENGINE", {
        ENGINE_RUN: fresh,
        NARWHAL_ENGINE_MODEL_NAME: "tiny-llama",
        NARWHAL_ENGINE_API_KEY: "e2e-key-0123456789",
      });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe("Engine health, version, model, process identity and completion passed.\n");
      const checked = await readJson<CheckResult>(path.join(fresh, "checked.json"));
      expect((await readJson<{ version: string }>(path.join(fresh, "version.json"))).version).toBe(
        checked.vllm_api_version,
      );
    } finally {
      await fs.rm(fresh, { recursive: true, force: true });
    }
  });

  it("the fleet-wide file follows every prepare and removal: the seed's groups stay narwhal's", async () => {
    const before = runs["engine-1"]!;
    await fleet.write({ engines: [engine1("4"), {}], kvTransfer: { prove: false } });
    await converge();
    expect(runs["engine-1"]).not.toBe(before);
    const launches = (await readJson<{ engines: Record<string, SeedLaunchRecord> }>(fleetFile())).engines;
    expect(Object.keys(launches)).toEqual(["engine-1", "engine-2"]);
    expect(launches["engine-1"]!.sources["runtime"]).toBe(path.join(runs["engine-1"]!, "engine-runtime.json"));
    const { seed, narwhal } = await groupsBoth();
    expect(seed).toBe(narwhal);
    expect(seed.split("\n")).toHaveLength(2);
  });
});
