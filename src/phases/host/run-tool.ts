// Runs a host inspection tool (nvidia-smi, rocminfo) with a deadline and the
// caller's AbortSignal, and turns every way it can fail into a NarwhalError
// that says whether trying again can help. A hung driver query must never
// stall the controller, so every run is bounded.

import { execFile } from "node:child_process";
import { CancelledError, NarwhalError } from "../../errors.js";

export interface ToolRunOptions {
  signal: AbortSignal;
  /** Milliseconds before the tool is killed and the run counts as a (retryable) timeout. */
  timeoutMs: number;
}

/** Default deadline: nvidia-smi can take several seconds on a cold driver. */
export const DEFAULT_TOOL_TIMEOUT_MS = 30_000;

// Recorded output is small; the cap only guards against a runaway tool.
const MAX_OUTPUT_BYTES = 8 * 1024 * 1024;

/**
 * Run `tool args...` and return its stdout. `input` names the node field that
 * chose the tool (e.g. "node.nvidia_smi") so failures point at it.
 */
export function runTool(tool: string, args: string[], input: string, opts: ToolRunOptions): Promise<string> {
  if (opts.signal.aborted) return Promise.reject(new CancelledError(`${tool} ${args.join(" ")}`));
  return new Promise((resolve, reject) => {
    execFile(
      tool,
      args,
      {
        signal: opts.signal,
        timeout: opts.timeoutMs,
        maxBuffer: MAX_OUTPUT_BYTES,
        encoding: "utf8",
        windowsHide: true,
      },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        reject(classifyToolFailure(tool, args, input, opts, err, stdout, stderr));
      },
    );
  });
}

type ExecFailure = Error & { code?: string | number | null; killed?: boolean; signal?: NodeJS.Signals | null };

function classifyToolFailure(
  tool: string,
  args: string[],
  input: string,
  opts: ToolRunOptions,
  err: ExecFailure,
  stdout: string,
  stderr: string,
): Error {
  const command = [tool, ...args].join(" ");
  if (opts.signal.aborted || err.name === "AbortError") return new CancelledError(command);
  if (err.code === "ENOENT" || err.code === "EACCES") {
    return new NarwhalError(`${tool} cannot be executed (${err.code})`, {
      input,
      fix: `Install ${tool} on this engine host or set ${input} to its path.`,
      retryable: false,
      cause: err,
    });
  }
  // execFile kills the child with SIGTERM when the deadline passes and marks it killed.
  if (err.killed) {
    return new NarwhalError(`${command} did not finish within ${opts.timeoutMs} ms`, {
      input,
      fix: `Check that the GPU driver on this host answers ${tool}; narwhal retries the inspection.`,
      retryable: true,
      cause: err,
    });
  }
  // A non-zero exit is a driver or installation fault (e.g. NVML version mismatch): retrying won't fix it.
  const said = (stderr.trim() || stdout.trim()).split("\n").slice(0, 3).join(" | ");
  return new NarwhalError(`${command} failed (exit ${String(err.code)})${said ? `: ${said}` : ""}`, {
    input,
    fix: `Repair the GPU driver or ${tool} installation on this engine host, then reconcile again.`,
    retryable: false,
    cause: err,
  });
}
