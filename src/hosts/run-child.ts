// Run one child process to completion with stdin, a deadline, an AbortSignal
// and an output cap: the one spawn both host accesses use (LocalHost runs the
// tool itself, SshHost runs the `ssh` client). The child leads its own process
// group so a deadline or an abort ends everything it started, not just it.
import { spawn } from "node:child_process";
import type { RunResult } from "./types.js";

/** SIGTERM first; what still runs this long after is sent SIGKILL. */
const KILL_GRACE_MS = 2_000;

export interface ChildOptions {
  env: Record<string, string>;
  cwd?: string;
  stdin?: string | Buffer;
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Bytes of stdout kept; past it the child is killed and `overflow` set. */
  maxStdoutBytes: number;
  /** Called once before a deadline or abort kills the child (SshHost ends the remote command first). */
  beforeKill?: () => Promise<void>;
  /** Sees stderr as it arrives (SshHost learns the remote pid from its first line). */
  onStderr?: (chunk: Buffer) => void;
}

export interface ChildResult extends RunResult {
  aborted: boolean;
  overflow: boolean;
  /** stdout as bytes (readFile over SSH is binary). */
  stdoutBytes: Buffer;
  /** The child could not be started at all (ENOENT, EACCES): nothing ran. */
  spawnError?: NodeJS.ErrnoException;
}

export function runChild(cmd: string, args: string[], opts: ChildOptions): Promise<ChildResult> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env: opts.env, cwd: opts.cwd, detached: true, stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let timedOut = false;
    let aborted = false;
    let overflow = false;
    let spawnError: NodeJS.ErrnoException | undefined;
    let killing: Promise<void> | undefined;
    const signalGroup = (sig: NodeJS.Signals) => {
      try {
        if (child.pid) process.kill(-child.pid, sig);
      } catch {
        /* already gone */
      }
    };
    const kill = () => {
      killing ??= (async () => {
        await opts.beforeKill?.().catch(() => undefined);
        signalGroup("SIGTERM");
        setTimeout(() => signalGroup("SIGKILL"), KILL_GRACE_MS).unref();
      })();
    };
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            kill();
          }, opts.timeoutMs);
    const onAbort = () => {
      aborted = true;
      kill();
    };
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    child.stdout.on("data", (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > opts.maxStdoutBytes) {
        overflow = true;
        kill();
      } else out.push(chunk);
    });
    child.stderr.on("data", (chunk: Buffer) => {
      err.push(chunk);
      opts.onStderr?.(chunk);
    });
    child.once("error", (e: NodeJS.ErrnoException) => (spawnError = e));
    child.once("close", (code, sig) => {
      if (timer) clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      const stdoutBytes = Buffer.concat(out);
      resolve({
        code,
        signal: sig,
        stdout: stdoutBytes.toString("utf8"),
        stdoutBytes,
        stderr: Buffer.concat(err).toString("utf8"),
        timedOut,
        aborted,
        overflow,
        ...(spawnError ? { spawnError } : {}),
      });
    });
    // The child may exit without reading its stdin (EPIPE): its exit status says what happened.
    child.stdin.on("error", () => undefined);
    child.stdin.end(opts.stdin ?? "");
    if (opts.signal?.aborted) onAbort();
  });
}
