// `narwhal logs` against real simulator engines and the built CLI: the native
// log of the current run, -f printing a line the engine writes after the follow
// began and ending (exit 0, said on stderr) when the engine is replaced,
// --previous printing the replaced run's log, and an unknown engine named with
// the engines that exist.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { runCli, startCli, teardown, waitFor } from "./cli.js";

describe("narwhal logs", () => {
  let fleet: SimFleet;
  const follows: ChildProcess[] = [];
  const dirs = () => ["--desired", fleet.dir, "--state", fleet.stateDir];
  /** Any request reaches the simulator's access log (stdout, so engine.log) as a line naming its path. */
  const request = (path: string) => fetch(`http://127.0.0.1:${fleet.ports[0]![0]}${path}`).then((r) => r.text());

  beforeAll(async () => {
    fleet = await simFleet();
    const r = await runCli(["reconcile", "--once", ...dirs()]);
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => {
    for (const f of follows) f.kill("SIGKILL");
    await teardown(fleet.stateDir);
  });

  it("prints the native engine's log of its current run, and --tail only its last lines", async () => {
    const marker = `/before-${randomUUID()}`;
    await request(marker);
    const r = await runCli(["logs", "engine-1", ...dirs()]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^==> engine-1: run \S+ \(current run\), \S+\/engine\.log <==$/m);
    expect(r.stdout).toContain("Application startup complete");
    expect(r.stdout).toContain(`"GET ${marker} HTTP/1.1" 404`);
    const tail = await runCli(["logs", "engine-1", "--tail", "1", ...dirs()]);
    expect(tail.code, tail.stderr).toBe(0);
    expect(tail.stdout.trimEnd().split("\n")).toHaveLength(1);
    expect(r.stdout.trimEnd().endsWith(tail.stdout.trimEnd())).toBe(true);
  });

  it("names an unknown engine and the engines that exist (exit 1)", async () => {
    const r = await runCli(["logs", "engin-1", ...dirs()]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("no engine named engin-1");
    expect(r.stderr).toContain("(engines: engine-1, engine-2)");
    expect(r.stderr).toContain("Did you mean engine-1?");
    const previous = await runCli(["logs", "engine-2", "--previous", ...dirs()]);
    expect(previous.code).toBe(1);
    expect(previous.stderr).toContain("engine-2 has 0 runs before its current one");
  });

  it("-f prints a line written after it started, and stops when the engine is replaced; --previous shows the old run", async () => {
    const follow = startCli(["logs", "engine-1", "-f", ...dirs()]);
    follows.push(follow);
    let stdout = "";
    let stderr = "";
    follow.stdout!.on("data", (d) => (stdout += d));
    follow.stderr!.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => follow.on("close", resolve));
    await waitFor("the follow to print the log so far", async () => stdout.includes("Application startup complete"));
    const after = `/after-${randomUUID()}`;
    await request(after);
    await waitFor("the follow to print a line written after it started", async () => stdout.includes(after), 15_000);

    // A replacement: the follow ends by itself, saying so, with exit 0.
    const edit = { extraArgs: ["--max-num-seqs", "64"] };
    await fleet.write({ engines: [edit, edit] }); // both: the pair stays compatible
    const r = await runCli(["reconcile", "--once", ...dirs()]);
    expect(r.code, r.stderr).toBe(0);
    expect(await exited).toBe(0);
    expect(stderr).toMatch(/narwhal: engine-1 was replaced: it now runs from run \S+; stopped following run \S+/);

    const previous = await runCli(["logs", "engine-1", "--previous", ...dirs()]);
    expect(previous.code, previous.stderr).toBe(0);
    expect(previous.stderr).toContain("(an older run)");
    expect(previous.stdout).toContain(after);
    const byCount = await runCli(["logs", "engine-1", "--run", "1", ...dirs()]);
    expect(byCount.stdout).toBe(previous.stdout);
    const current = await runCli(["logs", "engine-1", ...dirs()]);
    expect(current.code, current.stderr).toBe(0);
    expect(current.stdout).not.toContain(after);
    expect(current.stdout).toContain("max_num_seqs");
  });
});
