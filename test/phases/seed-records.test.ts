// <state>/engine-launch.sources.json (seed 003 §15: "config/engine-launch.sources.json indexes those
// references"): written beside engine-launch.local.json from each engine's current run, 0600, every
// engine's record file and its `sources` as absolute paths; an engine without a run is left out, and
// a rewrite after a removal drops it.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { prepare } from "../../src/phases/prepare.js";
import { fleetLaunchPath, fleetSourcesPath, writeFleetLaunchConfig } from "../../src/phases/seed-records.js";
import { APP, engineSpec, inspection } from "./plan-fixtures.js";

let state: string;
beforeAll(async () => {
  state = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-seed-records-"));
});
afterAll(async () => {
  await fs.rm(state, { recursive: true, force: true });
});

const readJson = async (file: string) => JSON.parse(await fs.readFile(file, "utf8"));

describe("engine-launch.sources.json: the index of each engine's launch record and its sources", () => {
  it("indexes each current run's record and sources (absolute, 0600), leaves out an engine without a run, follows a removal", async () => {
    const one = await prepare(engineSpec(), inspection(), { stateDir: state, app: APP });
    const two = await prepare(engineSpec({ name: "engine-2" }), inspection({ engine: "engine-2" }), {
      stateDir: state,
      app: APP,
    });
    await writeFleetLaunchConfig(state, [
      { engine: "engine-2", run_dir: two.dir },
      { engine: "engine-3", run_dir: null },
      { engine: "engine-1", run_dir: one.dir },
    ]);
    const index = await readJson(fleetSourcesPath(state));
    expect(fleetSourcesPath(state)).toBe(path.join(state, "engine-launch.sources.json"));
    expect((await fs.stat(fleetSourcesPath(state))).mode & 0o777).toBe(0o600);
    expect(Object.keys(index.engines)).toEqual(["engine-1", "engine-2"]);
    for (const [engine, run] of [
      ["engine-1", one],
      ["engine-2", two],
    ] as const) {
      expect(index.engines[engine].record).toBe(path.join(run.dir, "engine-launch.json"));
      expect(index.engines[engine].sources).toMatchObject({
        inspection: path.join(run.dir, "inspection.json"),
        runtime: path.join(run.dir, "engine-runtime.json"),
      });
      // The index names what the fleet file holds, and each file it names exists.
      expect(index.engines[engine].sources).toEqual((await readJson(fleetLaunchPath(state))).engines[engine].sources);
      await fs.access(index.engines[engine].sources.inspection);
      await fs.access(index.engines[engine].sources.runtime);
      // The record file's own sources are relative to its run: the index resolves them there.
      const record = await readJson(index.engines[engine].record);
      expect(record.sources.runtime).toBe("engine-runtime.json");
    }

    await writeFleetLaunchConfig(state, [{ engine: "engine-2", run_dir: two.dir }]);
    expect(Object.keys((await readJson(fleetSourcesPath(state))).engines)).toEqual(["engine-2"]);
  });
});
