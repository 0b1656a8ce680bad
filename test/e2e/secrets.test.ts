// A canary API key taken through the whole lifecycle at debug level must
// appear nowhere but the engine's private environment: not in narwhal's logs,
// the state file, launch.json, any other evidence file, or a command line.
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, runCli, startCli, status, teardown, waitFor } from "./cli.js";
import { assertKeyEnforced, reconcileOnce } from "./campaign.js";

const CANARY = "canary-5e3c7a9f-do-not-log";
// Only these files may hold the key: the engine's 0600 environment file (and, for containers, its 0600 key file).
const MAY_HOLD = new Set(["engine.env", "container.env", "api-key"]);

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
    outputs.push(
      ...Object.values(
        await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], env),
      ).map(String),
    );
    await fleet.write({ apiKey: CANARY, engines: [{}] });
    outputs.push(
      ...Object.values(
        await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], env),
      ).map(String),
    );

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
    for (const p of procs)
      expect((await fs.readFile(`/proc/${p.pid}/cmdline`, "utf8")).split("\0").join(" ")).not.toContain(CANARY);
  });
});

// A native engine gets its key through its environment: only its answers prove it enforces it.
describe("an engine that serves without its API key (native)", () => {
  let fleet: SimFleet;
  let controller: ChildProcess | undefined;
  afterEach(async () => {
    if (controller && controller.exitCode === null) {
      controller.kill("SIGTERM");
      await new Promise((r) => controller!.once("exit", r));
    }
    controller = undefined;
    await teardown(fleet.stateDir);
  });

  it("is never captured: probe fails it, naming the 200 it answered without the key", async () => {
    fleet = await simFleet({ engines: [{}, { faults: "ignore_api_key" }] });
    const r = await reconcileOnce(fleet);
    expect(r.code, r.stderr.slice(-2000)).toBe(2);
    const [e1, e2] = (await status(fleet.stateDir)).engines;
    expect(e1!.phase).toBe("captured");
    expect(e2!.phase).toBe("failed");
    expect(e2!.last_error).toMatchObject({ step: "probe", retryable: false });
    expect(e2!.last_error!.message).toContain("/v1/models answered HTTP 200 without the API key (401 expected)");
  });

  it("that serves with another key than its run's is restarted from a fresh run, the cause named", async () => {
    fleet = await simFleet();
    expect((await reconcileOnce(fleet)).code).toBe(0);
    const engines = async () => Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, e]));
    const { "engine-1": untouched, "engine-2": before } = await engines();
    // The run now holds a key the engine never got: the engine still refuses requests without a key (401),
    // but also the run's own key, which is the fleet's (clients holding it cannot use this engine).
    const envFile = path.join(before!.run_dir!, "engine.env");
    const text = await fs.readFile(envFile, "utf8");
    await fs.writeFile(envFile, text.replace(/^VLLM_API_KEY=.*$/m, "VLLM_API_KEY=not-the-engines-key"));
    const r = await reconcileOnce(fleet);
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    const { "engine-1": still, "engine-2": after } = await engines();
    expect(still!.pid, "engine-1 keeps running").toBe(untouched!.pid);
    expect(after).toMatchObject({ phase: "captured" });
    expect(after!.pid).not.toBe(before!.pid);
    expect(after!.run_dir).not.toBe(before!.run_dir);
    expect(after!.history.map((h) => h.note ?? "").join("\n")).toContain(
      "without its API key as recorded: /v1/models answered HTTP 401 to the run's own API key: the engine serves with another key",
    );
    await assertKeyEnforced(after!.run_dir!, "engine-2");
  });

  it("that stops enforcing it is replaced on resync, the cause named", async () => {
    // Enforces its key long enough to be captured, then answers without it.
    fleet = await simFleet({ engines: [{}, { faults: "ignore_api_key=20@engine-2" }] });
    controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir]);
    let log = "";
    controller.stderr!.on("data", (d) => (log += d));
    const first = await waitFor(
      "engine-2 captured",
      async () => (await status(fleet.stateDir)).engines.find((e) => e.engine === "engine-2" && e.phase === "captured"),
      60_000,
    );
    await assertKeyEnforced(first.run_dir!, "engine-2");
    const replaced = await waitFor(
      "engine-2 replaced",
      async () => {
        const e = (await status(fleet.stateDir)).engines.find((x) => x.engine === "engine-2");
        return e &&
          e.phase === "captured" &&
          e.pid !== first.pid &&
          e.history.some((h) => h.note?.includes("without the API key"))
          ? e
          : undefined;
      },
      60_000,
    );
    expect(replaced.history.map((h) => h.note ?? "").join("\n")).toContain(
      "does not hold its API key as recorded: /v1/models answered HTTP 200 without the API key",
    );
    expect(log).toContain("does not hold its API key as recorded");
    expect(
      await engineProcesses(fleet.stateDir).then((p) => p.filter((x) => x.engine === "engine-2").map((x) => x.pid)),
    ).not.toContain(first.pid);
  });
});
