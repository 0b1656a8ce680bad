// Runs a host inspection tool (nvidia-smi, rocminfo) on the engine's node with
// a deadline and the caller's AbortSignal, and turns every way it can fail into
// a NarwhalError that says whether trying again can help. A hung driver query
// must never stall the controller, so every run is bounded.

import { NarwhalError } from "../../errors.js";
import type { HostAccess, RunResult } from "../../hosts/types.js";

export interface ToolRunOptions {
  signal: AbortSignal;
  /** Milliseconds before the tool is killed and the run counts as a (retryable) timeout. */
  timeoutMs: number;
}

/** Default deadline: nvidia-smi can take several seconds on a cold driver. */
export const DEFAULT_TOOL_TIMEOUT_MS = 30_000;

/**
 * Run `tool args...` on the host and return its stdout. `input` names the node
 * field that chose the tool (e.g. "node.nvidia_smi") so failures point at it.
 * Cancellation and a node that cannot be reached are the host's own errors and pass through.
 */
export async function runTool(
  host: HostAccess,
  tool: string,
  args: string[],
  input: string,
  opts: ToolRunOptions,
): Promise<string> {
  const r = await host.run([tool, ...args], { signal: opts.signal, timeoutMs: opts.timeoutMs });
  if (r.code === 0 && !r.timedOut) return r.stdout;
  throw toolFailure(host.node, tool, args, input, opts, r);
}

/** A tool's run that did not exit 0, as the error it is: not executable and a failed exit are final, a deadline is not. */
export function toolFailure(
  node: string,
  tool: string,
  args: string[],
  input: string,
  opts: ToolRunOptions,
  r: RunResult,
): NarwhalError {
  const command = [tool, ...args].join(" ");
  // 127/126 are how both host kinds say "not found" / "not executable" (as a shell does): installing it is the fix.
  if (r.code === 127 || r.code === 126) {
    return new NarwhalError(`${tool} cannot be executed on node ${node} (${r.code === 127 ? "ENOENT" : "EACCES"})`, {
      input,
      fix: `Install ${tool} on node ${node} or set ${input} to its path there.`,
      retryable: false,
    });
  }
  if (r.timedOut) {
    return new NarwhalError(`${command} on node ${node} did not finish within ${opts.timeoutMs} ms`, {
      input,
      fix: `Check that the GPU driver on node ${node} answers ${tool}; narwhal retries the inspection.`,
      retryable: true,
    });
  }
  // A non-zero exit is a driver or installation fault (e.g. NVML version mismatch): retrying won't fix it.
  const said = (r.stderr.trim() || r.stdout.trim()).split("\n").slice(0, 3).join(" | ");
  return new NarwhalError(`${command} on node ${node} failed (exit ${r.code ?? r.signal})${said ? `: ${said}` : ""}`, {
    input,
    fix: `Repair the GPU driver or ${tool} installation on node ${node}, then reconcile again.`,
    retryable: false,
  });
}
