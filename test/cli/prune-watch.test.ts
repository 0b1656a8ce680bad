// Watch mode's retention (watchPruner) on real run directories: it prunes once the controller is
// settled, and again only after the state changed (a settled fleet's resyncs decide nothing new).
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { watchPruner } from "../../src/cli/prune.js";
import { loadConfig } from "../../src/config.js";
import { memoryLogger } from "../log/memory-logger.js";
import { createRunDir, runsRoot } from "../../src/state/run-dir.js";

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
});

const run = (stateDir: string, day: number) =>
  createRunDir(
    stateDir,
    "engine-1",
    "abcdef1234",
    [{ name: "launch.json", data: "{}", mode: 0o444 }],
    new Date(Date.UTC(2021, 0, day)),
  );
const runs = async (stateDir: string) => (await fs.readdir(runsRoot(stateDir, "engine-1"))).sort();

describe("watchPruner", () => {
  it("prunes once settled, then only after the state changed", async () => {
    const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-prune-watch-"));
    dirs.push(stateDir);
    for (const day of [1, 2, 3]) await run(stateDir, day);
    const config = loadConfig({ state: stateDir, desired: "/nonexistent/desired" }, { NARWHAL_KEEP_RUNS: "1" });
    const { log, lines } = memoryLogger();
    const said = () => lines.map((l) => l.message);
    let settled = false;
    let changes = 0;
    const pruner = watchPruner(
      config,
      log,
      () => settled,
      () => undefined,
      () => changes,
    );

    pruner.tick(); // not settled: nothing decided
    await pruner.idle();
    expect(await runs(stateDir)).toHaveLength(3);

    settled = true;
    pruner.tick();
    await pruner.idle();
    const newest = await runs(stateDir);
    expect(newest).toHaveLength(1);
    expect(said().filter((l) => l.startsWith("pruned run "))).toHaveLength(2);

    // An older run appears while nothing in the state changes: the next resyncs leave it.
    const older = path.basename(await run(stateDir, 0));
    pruner.tick();
    await pruner.idle();
    expect(await runs(stateDir)).toEqual([older, ...newest].sort());

    changes = 1;
    pruner.tick();
    await pruner.idle();
    expect(await runs(stateDir)).toEqual(newest);
    expect(said()).toContain(`pruned run ${older}`);
  });
});
