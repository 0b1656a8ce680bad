// A simulated fleet for `narwhal engine` actions: two engines sharing GPU 0
// (shared_device: gpu_memory_utilization 0.1 and 0.2 of an allowance of 0.3),
// host inspection against the h100x2 fixture, and the stateful nvidia-smi
// stand-in (test/sim/bin/nvidia-smi) whose memory readings count the
// simulators of this fleet's NARWHAL_SIM_GPU_POOL.
import fs from "node:fs/promises";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { REPO, simFleet, type SimFleet, type SimFleetOptions } from "./sim-fleet.js";
import { runCli, type CliResult } from "./cli.js";

export const SIM_NVIDIA_SMI = path.join(REPO, "test/sim/bin/nvidia-smi");
export const SHARED_GPU = "GPU-4f1a7c2e-8b3d-4e6f-9a0b-1c2d3e4f5a6b";

export interface EngineFleet extends SimFleet {
  /** NARWHAL_SIM_GPU_POOL of this fleet's engines; pass it to every CLI call that reads GPU memory. */
  pool: string;
  runs: string;
  env: Record<string, string>;
  /** `narwhal engine <args> --state <state> --format json`. */
  engine(args: string[], env?: Record<string, string>): Promise<CliResult>;
  /** prepare + check into runs/<name>; throws with the CLI's stderr on failure. */
  prepared(name: string, engine: string, env?: Record<string, string>): Promise<string>;
  /** A role shell's launch record: this fleet's record for `engine`, edited, written to a file (NARWHAL_ENGINE_LAUNCH_CONFIG). */
  roleRecord(engine: string, edit: (record: Record<string, any>) => void): Promise<string>;
}

export async function engineFleet(opts: SimFleetOptions & { allowance?: string } = {}): Promise<EngineFleet> {
  const pool = randomBytes(6).toString("hex");
  const base = await simFleet({
    readySeconds: 30,
    ...opts,
    engines: (opts.engines ?? [{}, {}]).map((e, i) => ({
      gpus: ["0"],
      ...e,
      // The simulator sizes its KV cache from an 80 GiB device, like the stand-in's 81559 MiB H100.
      environment: { NARWHAL_SIM_GPU_POOL: pool, NARWHAL_SIM_GPU_MEMORY_GIB: "80", ...(e.environment ?? {}) },
    })),
  });
  const fleetFile = path.join(base.dir, "fleet.json");
  const fleet = JSON.parse(await fs.readFile(fleetFile, "utf8"));
  // The node's nvidia-smi knows its own GPUs: a wrapper binds the stand-in to this fleet's pool, so
  // the reading does not depend on the caller's environment (narwhal runs tools on the node with the
  // node's environment, not the controller's; over ssh nothing else could reach it).
  const nvidiaSmi = path.join(path.dirname(base.dir), "bin", "nvidia-smi");
  await fs.mkdir(path.dirname(nvidiaSmi), { recursive: true });
  await fs.writeFile(nvidiaSmi, `#!/bin/sh\nNARWHAL_SIM_GPU_POOL=${pool} exec '${SIM_NVIDIA_SMI}' "$@"\n`, {
    mode: 0o755,
  });
  fleet.nodes[0].nvidia_smi = nvidiaSmi;
  await fs.writeFile(fleetFile, JSON.stringify(fleet, null, 2));
  const launchFile = path.join(base.dir, "engine-launch.json");
  const launch = JSON.parse(await fs.readFile(launchFile, "utf8"));
  Object.values(launch.engines as Record<string, Record<string, unknown>>).forEach((record, i) => {
    record.shared_device = {
      gpu_uuid: SHARED_GPU,
      device_allowance: opts.allowance ?? "0.3",
      gpu_memory_utilization: i === 0 ? "0.1" : "0.2",
    };
  });
  await fs.writeFile(launchFile, JSON.stringify(launch, null, 2));

  const runs = path.join(path.dirname(base.dir), "runs");
  const env = { NARWHAL_SIM_GPU_POOL: pool };
  const engine = (args: string[], extra: Record<string, string> = {}) =>
    runCli(["engine", ...args, "--state", base.stateDir, "--format", "json"], { ...env, ...extra });
  const prepared = async (name: string, which: string, extra: Record<string, string> = {}) => {
    const out = path.join(runs, name);
    const p = await engine(["prepare", "--desired", base.dir, "--engine", which, "--out", out], extra);
    if (p.code !== 0) throw new Error(`prepare ${name}: ${p.stderr}`);
    const c = await engine(["check", "--run", out], extra);
    if (c.code !== 0) throw new Error(`check ${name}: ${c.stderr}`);
    return out;
  };
  const roleRecord = async (which: string, edit: (record: Record<string, any>) => void) => {
    const record = structuredClone((await readJson(launchFile)).engines[which]);
    edit(record);
    const file = path.join(path.dirname(base.dir), `role-${which}-${randomBytes(3).toString("hex")}.json`);
    await fs.writeFile(file, JSON.stringify(record, null, 2));
    return file;
  };
  return { ...base, pool, runs, env, engine, prepared, roleRecord };
}

export async function readJson<T = Record<string, any>>(file: string): Promise<T> {
  return JSON.parse(await fs.readFile(file, "utf8")) as T;
}
