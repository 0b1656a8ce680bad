// The operator's record through the real CLI (issue 8 items 4–6): narwhal.log
// survives a refused second command and a controller restart; a state
// directory that cannot be written is exit 1 naming the path and the errno,
// never a silent exit 0; output through a pipe arrives whole, and a reader
// that goes away does not stop the work or change the exit code.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { validateDesired } from "../../src/desired/load.js";
import { validRecord, validTree, writeTree, type Obj } from "../desired/fixtures.js";
import { record, stateFile } from "../controller/records.js";
import {
  CLI,
  cliEnv,
  collect,
  engineProcesses,
  runCli,
  startCli,
  status,
  teardown,
  waitFor,
  type CliResult,
} from "./cli.js";

const LOG = "narwhal.log";
const allCaptured = async (stateDir: string) => {
  const engines = (await status(stateDir)).engines;
  return engines.length === 2 && engines.every((e) => e.phase === "captured") ? engines : undefined;
};

/** The CLI in a private mount namespace where `dir` is a read-only bind mount: root cannot write it either. */
function runReadOnly(dir: string, args: string[]): Promise<CliResult> {
  const child = spawn(
    "unshare",
    ["-m", "sh", "-c", 'mount --bind -o ro "$1" "$1" && shift && exec "$@"', "sh", dir, process.execPath, CLI, ...args],
    {
      env: cliEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  return collect(child);
}

/** A shell pipeline, as an operator types it; the exit code is narwhal's (PIPESTATUS), not the reader's. */
function pipeline(
  narwhalArgs: string[],
  reader: string,
): Promise<{ code: number | null; read: string; stderr: string }> {
  const quoted = [process.execPath, CLI, ...narwhalArgs].map((a) => `'${a}'`).join(" ");
  const child = spawn("bash", ["-c", `${quoted} ${reader}; exit "\${PIPESTATUS[0]}"`], {
    env: cliEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let read = "";
  let stderr = "";
  child.stdout.on("data", (d) => (read += d));
  // Kept for the failure message: a run that once exited 1 under load said nothing of why.
  child.stderr.on("data", (d) => (stderr += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, read, stderr })));
}

/** Every line of narwhal.log is one whole JSON object: no NUL bytes, no torn or overwritten lines. */
function expectWholeLines(text: string): void {
  expect(text.includes("\0"), "NUL bytes in narwhal.log").toBe(false);
  for (const line of text.trimEnd().split("\n")) expect(() => JSON.parse(line), line).not.toThrow();
}

describe("narwhal.log is the operator's record (item 4)", () => {
  let fleet: SimFleet;
  let controller: ChildProcess;
  const logFile = () => path.join(fleet.stateDir, LOG);

  beforeAll(async () => {
    fleet = await simFleet();
  });
  afterAll(async () => {
    if (controller?.exitCode === null) controller.kill("SIGKILL");
    await teardown(fleet.stateDir);
  });

  it("a refused reconcile and a refused down leave the live log whole, and the controller keeps appending to it", async () => {
    controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir]);
    await waitFor("both captured", () => allCaptured(fleet.stateDir));
    const before = await fs.readFile(logFile(), "utf8");
    expect(before).toMatch(/captured/);
    expect((await fs.stat(logFile())).mode & 0o777).toBe(0o600);

    const refused = [
      await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]),
      await runCli(["down", "--state", fleet.stateDir]),
    ];
    for (const r of refused) {
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/held by another controller/); // told on the console
    }
    const afterRefusals = await fs.readFile(logFile(), "utf8");
    expect(afterRefusals.startsWith(before), "the refused commands truncated the live log").toBe(true);
    expect(afterRefusals).not.toMatch(/held by another controller/);

    // The controller writes on (a desired edit replaces both engines: extra_args feed the group
    // signature, and a prefill and a decode of different groups cannot pair), after what was there.
    const edited = { extraArgs: ["--max-num-seqs", "16"] };
    await fleet.write({ engines: [edited, edited] });
    const grown = await waitFor("the edit applied in the log", async () => {
      const text = await fs.readFile(logFile(), "utf8");
      return text.length > afterRefusals.length && /desired state applied/.test(text.slice(afterRefusals.length))
        ? text
        : undefined;
    });
    expect(grown.startsWith(afterRefusals)).toBe(true);
    expectWholeLines(grown);
    await waitFor("both captured again", async () => {
      const e = await allCaptured(fleet.stateDir);
      return e && e.every((x) => x.desired_hash === x.running_hash);
    });

    controller.kill("SIGTERM");
    expect(await new Promise((r) => controller.once("exit", r))).toBe(0);
    const stopped = await fs.readFile(logFile(), "utf8");

    // A new controller start appends: the previous run's record is still there, first.
    const again = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(again.code, again.stderr).toBe(0);
    const restarted = await fs.readFile(logFile(), "utf8");
    expect(restarted.startsWith(stopped), "a controller start truncated narwhal.log").toBe(true);
    expect(restarted.length).toBeGreaterThan(stopped.length);
    expectWholeLines(restarted);
  });
});

describe("a state directory that cannot be written (item 5)", () => {
  let fleet: SimFleet;

  beforeAll(async () => {
    fleet = await simFleet();
  });
  afterAll(async () => {
    await teardown(fleet.stateDir);
  });

  const expectIoFailure = (r: CliResult, what: string) => {
    expect(r.code, `${what}: ${r.stderr}`).toBe(1);
    expect(r.stderr, what).toMatch(/EROFS \(read-only file system\)/);
    expect(r.stderr, what).toContain(fleet.stateDir);
    expect(r.stderr, what).not.toMatch(/internal error|\n\s+at /); // a typed message, not a stack trace
  };

  it("reconcile --once on an empty read-only state directory exits 1 with the path and the errno, and starts nothing", async () => {
    await fs.mkdir(fleet.stateDir, { recursive: true });
    expectIoFailure(
      await runReadOnly(fleet.stateDir, ["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]),
      "reconcile --once",
    );
    expect(await engineProcesses(fleet.stateDir)).toEqual([]);
  });

  it("every acting command on a read-only state directory of a running fleet exits 1 with the path and the errno; the engines keep running", async () => {
    const up = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(up.code, up.stderr).toBe(0);
    const running = (await engineProcesses(fleet.stateDir)).map((p) => p.pid).sort();
    expect(running.length).toBe(2);
    await fleet.write({ engines: [{}, { extraArgs: ["--max-num-seqs", "16"] }] }); // a change it would have to apply
    const stateBefore = await fs.readFile(path.join(fleet.stateDir, "narwhal.json"));
    expectIoFailure(
      await runReadOnly(fleet.stateDir, ["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]),
      "reconcile --once",
    );
    expectIoFailure(
      await runReadOnly(fleet.stateDir, ["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir]),
      "reconcile (watch)",
    );
    expectIoFailure(await runReadOnly(fleet.stateDir, ["down", "--state", fleet.stateDir]), "down");
    expect((await engineProcesses(fleet.stateDir)).map((p) => p.pid).sort()).toEqual(running);
    expect((await fs.readFile(path.join(fleet.stateDir, "narwhal.json"))).equals(stateBefore)).toBe(true);
    // Reading still works: status is not a write.
    const view = await runReadOnly(fleet.stateDir, ["status", "--state", fleet.stateDir, "--format", "json"]);
    expect(view.code, view.stderr).toBe(0);
    expect(JSON.parse(view.stdout).engines.length).toBe(2);
  });

  it("a state file that stops taking writes mid-run: reconcile --once exits 1 naming it and the errno, and a rerun converges without a second engine", async () => {
    const stateFile = path.join(fleet.stateDir, "narwhal.json");
    // Both are replaced (one group: a P/D pair must stay pairable); engine-2's new engine does not listen until the
    // test turns its slow_start switch off (the simulator's faults file), so its start stays unrecorded, `checked`,
    // until the state file is immutable. (A 4 s slow start was a window the status poll could miss.)
    const faultsFile = path.join(path.dirname(fleet.stateDir), "sim-faults");
    await fs.writeFile(faultsFile, "slow_start=600@engine-2\n");
    const edited = { extraArgs: ["--max-num-seqs", "16"], environment: { NARWHAL_SIM_FAULTS_FILE: faultsFile } };
    await fleet.write({ engines: [edited, edited] });
    const run = runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    try {
      await waitFor(
        "engine-2 starting from a new run",
        async () => {
          const e = (await status(fleet.stateDir)).engines.find((x) => x.engine === "engine-2");
          return e?.phase === "checked" && e.desired_hash !== e.running_hash;
        },
        30_000,
      );
      // chattr +i: even root cannot replace it (rename → EPERM). Then the start goes on, and its record is refused.
      execFileSync("chattr", ["+i", stateFile]);
      await fs.writeFile(faultsFile, "");
      const r = await run;
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(`narwhal: state: cannot rename `);
      expect(r.stderr).toContain(` to ${stateFile}: EPERM (operation not permitted)`);
      expect(r.stdout).toBe(""); // no report of a convergence that is not recorded
    } finally {
      execFileSync("chattr", ["-i", stateFile]);
      await fs.writeFile(faultsFile, "");
      await run;
    }
    const again = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(again.code, again.stderr).toBe(0);
    expect((await engineProcesses(fleet.stateDir)).length).toBe(2);
  }, 90_000);
});

describe("a reader that goes away (item 6)", () => {
  let fleet: SimFleet;

  beforeAll(async () => {
    fleet = await simFleet();
  });
  afterAll(async () => {
    await teardown(fleet.stateDir);
  });

  it("reconcile --once 2>&1 | head -3: the work finishes and the exit code is 0", async () => {
    const r = await pipeline(
      ["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir],
      "2>&1 | head -3",
    );
    expect(r.read.trimEnd().split("\n").length).toBe(3);
    expect(r.code, r.stderr).toBe(0);
    expect(await allCaptured(fleet.stateDir)).toBeDefined();
    expect((await engineProcesses(fleet.stateDir)).length).toBe(2);
  });

  it("reconcile --once | head -c 0 (the reader is gone before the report): still exit 0, and an unconverged run still exit 2", async () => {
    const ok = await pipeline(
      ["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir],
      "| head -c 0",
    );
    expect(ok.code, ok.stderr).toBe(0);
    // engine-2's check fails terminally: a NIXL pin, not a vLLM one, which would make the pair NIXL-incompatible (invalid desired).
    await fleet.write({ engines: [{}, { expectedPackages: { vllm: "0.11.0", nixl: "0.0.1" } }] });
    const failed = await pipeline(
      ["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir],
      "| head -c 0",
    );
    expect(failed.code, failed.stderr).toBe(2);
  });
});

describe("output through a pipe arrives whole (item 6)", () => {
  const PIPE_BUFFER = 64 * 1024;

  /**
   * A reader as slow as `| jq` starting up: it takes the first byte, then waits a second before it
   * reads on, so the CLI's output outruns the pipe (64 KiB) and must be flushed, not dropped at exit.
   */
  const SLOW_READER = "| { dd bs=1 count=1 status=none; sleep 1; cat; }";

  it("status --format json of 300 engines parses whole", async () => {
    const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-status-"));
    const names = Array.from({ length: 300 }, (_, i) => `engine-${i + 1}`);
    await fs.writeFile(path.join(stateDir, "narwhal.json"), JSON.stringify(stateFile(names.map((n) => record(n)))));
    const r = await pipeline(["status", "--state", stateDir, "--format", "json"], SLOW_READER);
    expect(r.code, r.stderr).toBe(0);
    expect(r.read.length).toBeGreaterThan(PIPE_BUFFER);
    expect((JSON.parse(r.read) as { engines: Array<{ engine: string }> }).engines.map((e) => e.engine).sort()).toEqual(
      [...names].sort(),
    );
  });

  it("validate --format json of a 1000-engine tree parses whole, with every issue", async () => {
    const tree = validTree();
    const engines = tree.launch["engines"] as Obj;
    // 1000 launch records the fleet does not declare: one issue (at least) for each, all reported.
    for (let k = 3; k <= 1000; k++) engines[`engine-${k}`] = validRecord("decode", [String(k % 8)]);
    const dir = await writeTree(tree);
    const { issues } = await validateDesired(dir);
    expect(issues.length).toBeGreaterThan(900);
    const r = await pipeline(["validate", "--desired", dir, "--format", "json"], SLOW_READER);
    expect(r.code, r.stderr).toBe(1);
    expect(r.read.length).toBeGreaterThan(PIPE_BUFFER);
    expect((JSON.parse(r.read) as { issues: unknown[] }).issues).toEqual(issues);
  });
});
