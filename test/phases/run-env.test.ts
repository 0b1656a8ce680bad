// The run's environment file is named for its backend (seed 001: a native engine's is engine.env;
// seed 000: a container's is container.env), every file prepare writes is private with the mode
// the seeds give it (seed 003: launch records and their extracts 0600; launch.json, immutable, 0400),
// and a native run prepared before engine.env (container.env only) is still read, so a controller
// upgraded in place probes, proves and checks the listeners of the engines it already runs.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalHost } from "../../src/hosts/local.js";
import { checkListeners } from "../../src/phases/listeners.js";
import { buildLaunchPlan, renderEnvFile } from "../../src/phases/plan.js";
import { prepare, readPlan } from "../../src/phases/prepare.js";
import { CONTAINER_ENV_FILE, ENGINE_ENV_FILE, readRunEnv } from "../../src/phases/run-env.js";
import { API_KEY, APP, engineSpec, inspection, launchRecord, planInputs } from "./plan-fixtures.js";

let state: string;
beforeAll(async () => {
  state = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-run-env-"));
});
afterAll(async () => {
  await fs.rm(state, { recursive: true, force: true });
});

const nativeSpec = () =>
  engineSpec({ backend: "native", launch: launchRecord({ backend: "native", image: undefined }) });

/** Every file under `dir` with its permission bits, directories included. */
async function modes(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = { ".": ((await fs.stat(dir)).mode & 0o777).toString(8) };
  for (const e of await fs.readdir(dir, { withFileTypes: true }))
    out[e.name] = ((await fs.lstat(path.join(dir, e.name))).mode & 0o777).toString(8);
  return out;
}

describe("the run's environment file and the modes of what prepare writes", () => {
  it("native: engine.env 0600 (no container.env); launch.json 0400; inspection.json 0600; nothing for group or others", async () => {
    const run = await prepare(nativeSpec(), inspection(), { stateDir: state, app: APP });
    expect(await modes(run.dir)).toEqual({
      ".": "700",
      [ENGINE_ENV_FILE]: "600",
      "launch.json": "400",
      "inspection.json": "600",
      // seed 000's complete manifest, and the seed-shaped launch record with the runtime observation it names.
      "model-manifest.json": "600",
      "engine-launch.json": "600",
      "engine-runtime.json": "600",
    });
    const { file, env } = await readRunEnv(run.dir);
    expect(file).toBe(ENGINE_ENV_FILE);
    expect(env.VLLM_API_KEY).toBe(API_KEY);
  });

  it("container: container.env 0600 and the key file 0600 beside launch.json 0400", async () => {
    const run = await prepare(engineSpec({ name: "engine-2" }), inspection({ engine: "engine-2" }), {
      stateDir: state,
      app: APP,
    });
    expect(await modes(run.dir)).toEqual({
      ".": "700",
      [CONTAINER_ENV_FILE]: "600",
      "api-key": "600",
      "launch.json": "400",
      "inspection.json": "600",
      // seed 000's complete manifest, and the seed-shaped launch record with the runtime observation it names.
      "model-manifest.json": "600",
      "engine-launch.json": "600",
      "engine-runtime.json": "600",
    });
    expect((await readRunEnv(run.dir)).file).toBe(CONTAINER_ENV_FILE);
  });

  it("a native run prepared before engine.env (container.env only) is still read: key and NIXL listener source", async () => {
    const { plan, env } = buildLaunchPlan(planInputs({ spec: nativeSpec() }));
    const old = path.join(state, "old-native-run");
    await fs.mkdir(old, { mode: 0o700 });
    await fs.writeFile(path.join(old, CONTAINER_ENV_FILE), renderEnvFile(env), { mode: 0o600 });
    expect(await readRunEnv(old)).toEqual({ file: CONTAINER_ENV_FILE, env });
    const checks = await checkListeners(new LocalHost("node-1", { PATH: "/usr/bin:/bin" }), old, plan, {});
    expect(checks.find((c) => c.purpose === "nixl side channel")).toMatchObject({
      port: 5601,
      source: `${CONTAINER_ENV_FILE} VLLM_NIXL_SIDE_CHANNEL_PORT`,
    });
    const fresh = await prepare(nativeSpec(), inspection(), { stateDir: path.join(state, "s2"), app: APP });
    const current = await checkListeners(
      new LocalHost("node-1", { PATH: "/usr/bin:/bin" }),
      fresh.dir,
      (await readPlan(fresh.dir)).plan,
      {},
    );
    expect(current.find((c) => c.purpose === "nixl side channel")?.source).toBe(
      `${ENGINE_ENV_FILE} VLLM_NIXL_SIDE_CHANNEL_PORT`,
    );
  });

  it("a run with neither file is ENOENT, naming both names", async () => {
    const empty = path.join(state, "empty-run");
    await fs.mkdir(empty);
    await expect(readRunEnv(empty)).rejects.toMatchObject({
      code: "ENOENT",
      message: expect.stringContaining("neither engine.env nor container.env"),
    });
  });
});
