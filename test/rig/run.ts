// Small process helpers for the rig: run a command to completion (async or sync),
// sync for process-exit cleanup. The rig is root-only test setup, so failures throw
// plain Errors that name the command and its stderr.
import { spawn, spawnSync } from "node:child_process";

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** written to the command's stdin, then closed */
  input?: string;
  /** kill the command (SIGKILL) after this many ms; default 30 s */
  timeoutMs?: number;
}

/** Run argv to completion; never throws for a non-zero exit (code is -1 when killed by a signal). */
export function run(argv: string[], opts: RunOptions = {}): Promise<RunResult> {
  const [cmd, ...args] = argv;
  if (!cmd) return Promise.reject(new Error("run: empty argv"));
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 30_000);
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
    child.stdin.on("error", () => {}); // the command may exit before reading its stdin
    child.stdin.end(opts.input ?? "");
  });
}

/** Run argv and throw unless it exits 0. */
export async function runOk(argv: string[], opts: RunOptions = {}): Promise<string> {
  const r = await run(argv, opts);
  if (r.code !== 0) throw new Error(`rig: \`${argv.join(" ")}\` exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** Synchronous run for process-exit cleanup, where no event loop turn is left; errors are ignored. */
export function runSync(argv: string[]): RunResult {
  const [cmd, ...args] = argv;
  const r = spawnSync(cmd ?? "true", args, { encoding: "utf8", timeout: 10_000 });
  return { code: r.status ?? -1, stdout: r.stdout ?? "", stderr: r.stderr ?? "" };
}
