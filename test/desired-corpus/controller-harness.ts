// Shared by the bad-input and watch-edit e2e suites: a watch-mode controller
// process with its console log captured, and what "touched" means for an
// engine — its pid, its run directory and the length of its state history.
import type { ChildProcess } from "node:child_process";
import { readState } from "../../src/state/store.js";
import { startCli, waitFor } from "../e2e/cli.js";

export interface EngineMark {
  phase: string;
  pid: number | null;
  run_dir: string | null;
  /** Transitions recorded in the state file; any restart or replacement adds some. */
  history: number;
  /** How many times the state history says the engine was started. */
  starts: number;
}

/** Engines as the state file records them (read directly: no CLI process per poll). */
export async function engineMarks(stateDir: string): Promise<Record<string, EngineMark>> {
  const state = await readState(stateDir);
  return Object.fromEntries(
    Object.values(state.engines).map((e) => [
      e.engine,
      {
        phase: e.phase,
        pid: e.handle?.kind === "native" ? e.handle.pid : null,
        run_dir: e.run_dir,
        history: e.history.length,
        starts: e.history.filter((h) => h.to === "started").length,
      },
    ]),
  );
}

export async function allCaptured(stateDir: string, n = 2): Promise<Record<string, EngineMark> | undefined> {
  const marks = await engineMarks(stateDir);
  const list = Object.values(marks);
  return list.length === n && list.every((m) => m.phase === "captured" && m.pid !== null) ? marks : undefined;
}

export function alive(pid: number | null): boolean {
  if (pid === null) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export interface WatchController {
  proc: ChildProcess;
  /** Everything the controller printed so far. */
  log(): string;
  /** A position in the log, to look only at what comes after it. */
  mark(): number;
  since(mark: number): string;
  waitLog(what: RegExp, since: number, timeoutMs?: number): Promise<string>;
  /** "desired state applied" lines since a mark: one per successful reload. */
  applied(since: number): number;
  stop(): Promise<number | null>;
}

export function startWatch(desiredDir: string, stateDir: string, env: Record<string, string> = {}): WatchController {
  const proc = startCli(["reconcile", "--desired", desiredDir, "--state", stateDir], env);
  let text = "";
  proc.stdout!.on("data", (d) => (text += d));
  proc.stderr!.on("data", (d) => (text += d));
  const since = (m: number) => text.slice(m);
  return {
    proc,
    log: () => text,
    mark: () => text.length,
    since,
    waitLog: (what, m, timeoutMs = 15_000) =>
      waitFor(
        `log line ${what}`,
        async () => {
          if (proc.exitCode !== null) throw new Error(`controller exited (${proc.exitCode}):\n${text}`);
          return what.test(since(m)) ? since(m) : undefined;
        },
        timeoutMs,
      ),
    applied: (m) =>
      since(m)
        .split("\n")
        .filter((l) => l.includes("desired state applied")).length,
    stop: async () => {
      if (proc.exitCode !== null) return proc.exitCode;
      const exited = new Promise<number | null>((r) => proc.once("exit", (code) => r(code)));
      proc.kill("SIGTERM");
      return exited;
    },
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
