// The terminal views, in a real pseudo-terminal (util-linux `script`): the live
// line of an engine waiting for /health during a slow start, erased in place and
// followed by the one-line summary; colour in `status` on a terminal only, and
// never with NO_COLOR or --no-color; `status --watch` redrawing in place, and
// into a pipe printing each change once until SIGINT (exit 0).
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { CLI, runCli, startCli, teardown, cliEnv, waitFor } from "./cli.js";

const ESC = "\x1b[";

/** Run the CLI in a pseudo-terminal: what the terminal shows (stdout and stderr, as one stream) and the exit code. */
function inPty(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; screen: string }> {
  const command = [process.execPath, CLI, ...args].map((a) => `'${a}'`).join(" ");
  // A terminal of 200 columns: the live lines are cut to the terminal's width.
  const child = spawn("script", ["-qfec", `stty cols 200; ${command}`, "/dev/null"], {
    env: cliEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let screen = "";
  child.stdout.on("data", (d) => (screen += d));
  child.stderr.on("data", (d) => (screen += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, screen })));
}

describe("terminal views", () => {
  let fleet: SimFleet;
  const dirs = () => ["--desired", fleet.dir, "--state", fleet.stateDir];

  beforeAll(async () => {
    fleet = await simFleet({ engines: [{ faults: "slow_start=3" }] });
  });
  afterAll(async () => {
    await teardown(fleet.stateDir);
  });

  it("reconcile --once on a terminal: a live line while the start awaits /health, erased in place, then the summary", async () => {
    const r = await inPty(["reconcile", "--once", ...dirs()]);
    expect(r.code, r.screen).toBe(0);
    // The live line: engine, step, elapsed, what is awaited and the step's bound.
    expect(r.screen).toMatch(/engine-1 +start +\d+ s +waiting for \/health to answer 200, \d+ s of 60/);
    // Redrawn in place: cursor up and erase below, never a scrolling copy per second only.
    expect(r.screen).toContain(`${ESC}J`);
    expect(r.screen).toMatch(/converged in \d+ s: 1 of 1 engine captured/);
    // The log file holds the awaited condition as a plain line, what a pipe or CI shows.
    const log = await fs.readFile(path.join(fleet.stateDir, "narwhal.log"), "utf8");
    expect(log).toMatch(/waiting for \/health to answer 200 at http:\/\/[^ ]+\/health, up to 60 s/);
  });

  it("reconcile --once into a pipe: plain log lines, no escape sequences", async () => {
    const r = await runCli(["reconcile", "--once", ...dirs()]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain(ESC);
    expect(r.stderr).toMatch(/converged in \d+ s: 1 of 1 engine captured/);
  });

  it("status: colour on a terminal; none with NO_COLOR, --no-color, or into a pipe", async () => {
    const tty = await inPty(["status", ...dirs()]);
    expect(tty.code, tty.screen).toBe(0);
    expect(tty.screen).toContain(`${ESC}32mcaptured`);
    const noColor = await inPty(["status", ...dirs()], { NO_COLOR: "1" });
    expect(noColor.screen).toMatch(/engine-1 +captured/);
    expect(noColor.screen).not.toContain(ESC);
    const flag = await inPty(["status", "--no-color", ...dirs()]);
    expect(flag.screen).toMatch(/engine-1 +captured/);
    expect(flag.screen).not.toContain(ESC);
    const piped = await runCli(["status", ...dirs()]);
    expect(piped.stdout).toMatch(/engine-1 +captured/);
    expect(piped.stdout).not.toContain(ESC);
  });

  it("status --watch: in place on a terminal; into a pipe each change once, and SIGINT ends both with 0", async () => {
    const watch = ["status", "--watch", "--interval", "0.2", ...dirs()];
    const piped = startCli(watch);
    let out = "";
    piped.stdout!.on("data", (d) => (out += d));
    const pipedClosed = new Promise<number | null>((resolve) => piped.on("close", (code) => resolve(code)));
    let screen = "";
    const command = [process.execPath, CLI, ...watch].map((a) => `'${a}'`).join(" ");
    const pty = spawn("script", ["-qfec", `stty cols 200; ${command}`, "/dev/null"], {
      env: cliEnv(),
    });
    pty.stdout.on("data", (d) => (screen += d));
    const ptyClosed = new Promise<number | null>((resolve) => pty.on("close", (code) => resolve(code)));
    const redraws = () => screen.split(`${ESC}H${ESC}2J`).length - 1;
    // The terminal's redraws are the clock: six looks of both watchers, and nothing changed meanwhile.
    await waitFor("six redraws on the terminal", async () => redraws() >= 6 && out.includes("engine-1"), 30_000);
    expect(screen).toMatch(/engine-1 +.*captured/);
    expect(out.match(/^--- /gm)?.length, out).toBe(1);
    expect(out).not.toContain(ESC);
    // A change is printed once: the engine stopped.
    expect((await runCli(["down", "--state", fleet.stateDir])).code).toBe(0);
    const last = () => out.split(/^--- .*$/m).pop() ?? "";
    // down has ended and released the lock: the last state, once printed, is not printed again.
    await waitFor("the change", async () => /engine-1 +stopped/.test(last()) && /not running/.test(last()), 20_000);
    const [seen, blocks] = [redraws(), out.match(/^--- /gm)!.length];
    await waitFor("three more redraws", async () => redraws() >= seen + 3, 20_000);
    expect(out.match(/^--- /gm)!.length, out).toBe(blocks);
    // Each block differs from the one before it (the stamp aside).
    const printed = out.split(/^--- .*$/m).slice(1);
    for (let i = 1; i < printed.length; i++) expect(printed[i], out).not.toBe(printed[i - 1]);
    piped.kill("SIGINT");
    expect(await pipedClosed).toBe(0);
    // The watcher in the terminal is script's child, in its own session: signalled by its command line.
    const pids = (await fs.readdir("/proc")).filter((d) => /^\d+$/.test(d));
    for (const pid of pids) {
      const cmd = await fs.readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
      if (cmd.includes(CLI) && cmd.includes("--watch") && cmd.includes(fleet.stateDir) && Number(pid) !== piped.pid)
        process.kill(Number(pid), "SIGINT");
    }
    expect(await ptyClosed).toBe(0);
  });
});
