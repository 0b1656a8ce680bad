// What a lost engine's failure says, and how a step on a running engine tells its own failure from the
// engine's death. A probe (or capture) that fails because the process exited under it failed retryably
// ("GET /version failed: ECONNREFUSED"), and the machine retried it from the same step: against a dead
// process, every retry fails alike until the attempts are spent and the engine is terminal. The resync's
// ENGINE_LOST that came after found it failed and terminal, so a watch left it dead until an operator's
// retry or a desired edit, where the same death after capture is restarted. Such a failure is now the
// loss it is (EngineLost: a fresh run, with backoff, one attempt spent, as ENGINE_LOST counts it).
import type { EngineBackend } from "../backends/types.js";
import { EngineLost, type Step } from "../errors.js";
import { redactText } from "../log.js";
import type { EngineHandle, PreparedRun } from "../phases/types.js";

/**
 * How much of a lost engine's log its last lines are read from. Every observation of a lost engine
 * (each plan and pass) reads them: read at the log cap (16 MiB), a plan of 1000 lost engines with
 * 20 MB logs took 230 s of CPU and 17.7 GB of memory.
 */
const LOST_REASON_TAIL_BYTES = 16 * 1024;

/** Why the engine is gone, as its own log says last: `exited`, or "`exited`; last log lines: a | b | c". */
export async function lostReason(
  backend: EngineBackend,
  run: PreparedRun,
  handle: EngineHandle,
  secrets: string[],
  exited = "exited",
): Promise<string> {
  const log = (await backend.startupLog(run, handle, { tailBytes: LOST_REASON_TAIL_BYTES })).text;
  const last = log.trimEnd().split("\n").filter(Boolean).slice(-3).join(" | ");
  return last ? `${exited}; last log lines: ${redactText(last, secrets)}` : exited;
}

export interface RunningEngine {
  engine: string;
  step: Step;
  backend: EngineBackend;
  run: PreparedRun;
  handle: EngineHandle;
  secrets: string[];
  signal: AbortSignal;
}

/**
 * `body`, a step on the running engine; when it fails retryably and the engine no longer runs as its
 * handle, an EngineLost naming the step's failure and the log's last lines instead. A failure that is
 * not retryable stands (the engine answered: what it answered is the finding), as does one whose
 * engine cannot be observed now (its node unreachable: nothing is decided on a guess).
 */
export async function unlessGone<T>(e: RunningEngine, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (err) {
    const retryable = (err as { retryable?: unknown }).retryable !== false;
    if (e.signal.aborted || !retryable) throw err;
    const alive = await e.backend.isAlive(e.handle).catch(() => true);
    if (alive) throw err;
    // What the step met first (a status line truncates a long note: the log's lines come last).
    const exited = `exited during its ${e.step} (${(err as Error).message})`;
    throw new EngineLost(
      e.engine,
      e.step,
      await lostReason(e.backend, e.run, e.handle, e.secrets, exited).catch(() => exited),
    );
  }
}
