// pruneRuns on real run directories (written by createRunDir): a run holding a
// failed start's start-failure.json goes only together with its kept container.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { pruneRuns, type KeptContainer } from "../../src/state/prune-runs.js";
import { createRunDir, runsRoot } from "../../src/state/run-dir.js";
import { record, stateFile } from "../controller/records.js";

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
});

async function stateWithRuns(): Promise<{ stateDir: string; names: string[] }> {
  const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-prune-"));
  dirs.push(stateDir);
  const names: string[] = [];
  for (let i = 0; i < 3; i++) {
    const files = [{ name: "launch.json", data: "{}", mode: 0o444 }];
    // The oldest run is a failed container start's: its evidence names the kept container.
    if (i === 0)
      files.push({
        name: "start-failure.json",
        data: JSON.stringify({ engine: "engine-1", endpoint: "unix:///run/docker.sock", Id: "f".repeat(64), Name: "narwhal-engine-1-failed-ffffffffffff" }),
        mode: 0o600,
      });
    names.push(path.basename(await createRunDir(stateDir, "engine-1", "abcdef1234", files, new Date(Date.UTC(2021, 0, 1 + i)))));
  }
  return { stateDir, names };
}
const state = stateFile([record("engine-1", { run_dir: null, handle: null, snapshot: null })]);

describe("pruneRuns", () => {
  it("keeps a run whose kept container it has no way to remove, saying why", async () => {
    const { stateDir, names } = await stateWithRuns();
    const [e] = await pruneRuns(stateDir, state, { keep: 1, dryRun: false });
    expect(e!.removed.map((r) => r.run)).toEqual([names[1]]);
    expect(e!.failed).toEqual([{ run: names[0], why: expect.stringMatching(/kept container narwhal-engine-1-failed-ffffffffffff/) }]);
    expect((await fs.readdir(runsRoot(stateDir, "engine-1"))).sort()).toEqual([names[0], names[2]]);
  });

  it("removes the kept container with its run, and keeps the run when the container cannot be removed", async () => {
    const { stateDir, names } = await stateWithRuns();
    const refused = await pruneRuns(stateDir, state, {
      keep: 1,
      dryRun: false,
      removeKept: () => Promise.reject(new Error("daemon not answering")),
    });
    expect(refused[0]!.failed).toEqual([{ run: names[0], why: expect.stringMatching(/daemon not answering/) }]);
    const removed: KeptContainer[] = [];
    const [e] = await pruneRuns(stateDir, state, { keep: 1, dryRun: false, removeKept: async (k) => void removed.push(k) });
    expect(removed.map((k) => k.id)).toEqual(["f".repeat(64)]);
    expect(e!.removed).toEqual([{ run: names[0], kept_container: "narwhal-engine-1-failed-ffffffffffff" }]);
    expect(await fs.readdir(runsRoot(stateDir, "engine-1"))).toEqual([names[2]]);
  });

  it("removes a run's node-side copy first, and keeps the run when that fails", async () => {
    const { stateDir, names } = await stateWithRuns();
    const refused = await pruneRuns(stateDir, state, {
      keep: 2,
      dryRun: false,
      removeKept: async () => undefined,
      removeOnNode: () => Promise.reject(new Error("node gpu-b unreachable")),
    });
    expect(refused[0]!.failed).toEqual([{ run: names[0], why: expect.stringMatching(/copy on the engine's node: .*gpu-b unreachable/) }]);
    expect((await fs.readdir(runsRoot(stateDir, "engine-1"))).sort()).toEqual([...names].sort());
    const onNode: string[] = [];
    await pruneRuns(stateDir, state, { keep: 2, dryRun: false, removeKept: async () => undefined, removeOnNode: async (_e, d) => void onNode.push(d) });
    expect(onNode).toEqual([path.join(runsRoot(stateDir, "engine-1"), names[0]!)]);
    expect((await fs.readdir(runsRoot(stateDir, "engine-1"))).sort()).toEqual([names[1], names[2]]);
  });

  it("a dry run removes neither runs nor containers", async () => {
    const { stateDir, names } = await stateWithRuns();
    const removed: KeptContainer[] = [];
    const [e] = await pruneRuns(stateDir, state, { keep: 0, dryRun: true, removeKept: async (k) => void removed.push(k) });
    expect(e!.removed.map((r) => r.run).sort()).toEqual([...names].sort());
    expect(removed).toEqual([]);
    expect((await fs.readdir(runsRoot(stateDir, "engine-1"))).sort()).toEqual([...names].sort());
  });
});
