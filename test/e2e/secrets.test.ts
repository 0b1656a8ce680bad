// A canary API key taken through the whole lifecycle at debug level must
// appear nowhere but the engine's private environment: not in narwhal's logs,
// the state file, launch.json, any other evidence file, or a command line.
import { afterAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, runCli, teardown } from "./cli.js";

const CANARY = "canary-5e3c7a9f-do-not-log";
// Only these files may hold the key: the engine's 0600 environment file (and, for containers, its 0600 key file).
const MAY_HOLD = new Set(["container.env", "api-key"]);

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesUnder(p)));
    else out.push(p);
  }
  return out;
}

describe("the engine API key", () => {
  let fleet: SimFleet;
  afterAll(() => teardown(fleet.stateDir));

  it("never leaks through a full lifecycle at debug level", async () => {
    fleet = await simFleet({ apiKey: CANARY });
    const env = { NARWHAL_LOG_LEVEL: "debug" };
    const outputs: string[] = [];
    for (const args of [
      ["validate", "--desired", fleet.dir, "--format", "json"],
      ["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir, "--format", "json"],
      ["status", "--state", fleet.stateDir, "--format", "json"],
      ["status", "engine-1", "--state", fleet.stateDir],
    ]) {
      const r = await runCli(args, env);
      expect(r.code, r.stderr).toBe(0);
      outputs.push(r.stdout, r.stderr);
    }
    // Replace engine-2 and remove it, so stop paths log too.
    await fleet.write({ apiKey: CANARY, engines: [{}, { extraArgs: ["--max-num-seqs", "12"] }] });
    outputs.push(...Object.values(await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], env)).map(String));
    await fleet.write({ apiKey: CANARY, engines: [{}] });
    outputs.push(...Object.values(await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], env)).map(String));

    for (const text of outputs) expect(text).not.toContain(CANARY);
    let holders = 0;
    for (const file of await filesUnder(fleet.stateDir)) {
      const text = await fs.readFile(file, "utf8");
      if (MAY_HOLD.has(path.basename(file))) {
        if (text.includes(CANARY)) {
          holders++;
          expect((await fs.stat(file)).mode & 0o777, file).toBe(0o600);
        }
      } else expect(text, file).not.toContain(CANARY);
    }
    expect(holders).toBeGreaterThan(0); // the key did reach the engines' private environment
    const procs = await engineProcesses(fleet.stateDir);
    expect(procs.length).toBe(1);
    for (const p of procs) expect((await fs.readFile(`/proc/${p.pid}/cmdline`, "utf8")).split("\0").join(" ")).not.toContain(CANARY);
  });
});
