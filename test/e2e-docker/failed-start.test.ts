// Seed 000, "If startup fails: use the recorded container ID. Trace the failure
// ...": an engine container that fails its start is kept, stopped and renamed
// narwhal-<engine>-failed-<id12>, with its docker inspect state in the run
// directory (start-failure.json), and the error names it. The engine's next
// attempt removes it before creating its own; nothing sweeps or adopts it; down removes it.
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { simFleet } from "../e2e/sim-fleet.js";
import { runCli, status } from "../e2e/cli.js";
import { dockerClient } from "../docker/sim-image.mjs";

const docker = dockerClient(inject("dockerHost"));
const env = { DOCKER_HOST: inject("dockerHost"), NARWHAL_RETRY_BASE_MS: "200", NARWHAL_RETRY_CAP_MS: "400" };

interface StartFailure {
  engine: string;
  Id: string;
  Name: string;
  Image: string;
  State: { Status: string; ExitCode: number; OOMKilled: boolean; Error: string; FinishedAt: string };
}

async function startFailures(stateDir: string): Promise<StartFailure[]> {
  const root = path.join(stateDir, "runs", "engine-1");
  const runs = (await fs.readdir(root)).filter((r) => !r.startsWith(".")).sort();
  const found: StartFailure[] = [];
  for (const r of runs) {
    const text = await fs.readFile(path.join(root, r, "start-failure.json"), "utf8").catch(() => null);
    if (text !== null) found.push(JSON.parse(text) as StartFailure);
  }
  return found;
}

describe("a failed start keeps its container", () => {
  const stateDirs: string[] = [];
  afterAll(async () => {
    for (const s of stateDirs) await runCli(["down", "--state", s], env);
  });
  const ours = (stateDir: string) =>
    docker.listContainers({ all: true, filters: { label: [`io.narwhal.state=${stateDir}`] } });

  it("keeps it stopped with its inspect state as evidence, removes it at the next attempt, and down removes the last", async () => {
    const fleet = await simFleet({
      engines: [{ faults: "crash_at_start" }],
      container: { image: inject("simImage") },
      kvTransfer: { prove: false },
    });
    stateDirs.push(fleet.stateDir);
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
      ...env,
      NARWHAL_RETRY_MAX_ATTEMPTS: "2",
    });
    expect(r.code, r.stderr.slice(-2000)).toBe(2);

    // Two attempts, two run directories, each with the evidence of its own container.
    const failures = await startFailures(fleet.stateDir);
    expect(failures).toHaveLength(2);
    for (const f of failures) {
      expect(f).toMatchObject({
        engine: "engine-1",
        Image: inject("simImageId"),
        Name: `narwhal-engine-1-failed-${f.Id.slice(0, 12)}`,
        State: { Status: "exited", ExitCode: 1, OOMKilled: false },
      });
      expect(Date.parse(f.State.FinishedAt)).toBeGreaterThan(0);
    }
    // The first attempt's container went when the second started; the second's is kept, stopped.
    const left = await ours(fleet.stateDir);
    expect(left.map((c) => [c.Id, c.State, c.Names])).toEqual([[failures[1]!.Id, "exited", [`/${failures[1]!.Name}`]]]);
    // container.id names the kept container, and so does the engine's error.
    const runDirs = (await fs.readdir(path.join(fleet.stateDir, "runs", "engine-1"))).filter((d) => !d.startsWith("."));
    const last = path.join(fleet.stateDir, "runs", "engine-1", runDirs.sort().at(-1)!);
    expect((await fs.readFile(path.join(last, "container.id"), "utf8")).trim()).toBe(failures[1]!.Id);
    const [engine] = (await status(fleet.stateDir)).engines;
    expect(engine!.last_error!.message).toContain(
      `container ${failures[1]!.Id.slice(0, 12)} is kept, stopped, as ${failures[1]!.Name}`,
    );
    expect(engine!.last_error!.message).toContain(path.join(last, "start-failure.json"));

    // A controller starting over neither adopts nor sweeps it (plan shows no orphan to sweep).
    const plan = await runCli(["plan", "--desired", fleet.dir, "--state", fleet.stateDir, "--format", "json"], env);
    const actions = (JSON.parse(plan.stdout) as { plan: { actions: Array<{ kind: string }> } }).plan.actions;
    expect(actions.filter((a) => a.kind === "sweep-orphan" || a.kind === "adopt")).toEqual([]);

    // narwhal logs reads the kept container's own log: the error that failed the start.
    const logs = (...args: string[]) =>
      runCli(["logs", "engine-1", ...args, "--desired", fleet.dir, "--state", fleet.stateDir], env);
    const kept = await logs();
    expect(kept.code, kept.stderr).toBe(0);
    expect(kept.stderr).toContain(`container ${failures[1]!.Id.slice(0, 12)} (exited, kept after its failed start)`);
    expect(kept.stdout).toContain("CUDA out of memory");
    expect(kept.stdout).not.toMatch(/[\x00-\x08]/); // Docker's frame headers taken off
    // The first attempt's container is gone: its log is the copy taken when it was removed.
    const previous = await logs("--previous");
    expect(previous.code, previous.stderr).toBe(0);
    expect(previous.stderr).toContain("(an older run)");
    expect(previous.stdout).toContain("CUDA out of memory");

    const down = await runCli(["down", "--state", fleet.stateDir], env);
    expect(down.code, down.stderr.slice(-2000)).toBe(0);
    expect(await ours(fleet.stateDir)).toEqual([]);
  });
});
