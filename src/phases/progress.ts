// What a long step is waiting for, said while it waits: `narwhal reconcile` on a
// terminal draws it as one live line per engine ("start  12 s  waiting for
// /health, 12 s of 180"), and the log records it as a plain line. Nothing
// decides on it: a step reports and goes on; a sink that is absent costs nothing.
import type { Step } from "../errors.js";

/** One awaited condition of a step: what it waits for, and the step's own bound on it. */
export interface StepWait {
  /** What is awaited, in the operator's words ("/health to answer 200"). */
  awaiting: string;
  /** Where, for the log (the URL asked): the live line leaves it out, the engine is named there. */
  at?: string;
  /** How long the step waits at most (null: no bound of its own, e.g. cancellation only). */
  limitMs: number | null;
  /**
   * How far the wait has come, when the step can tell ("12.1 of 40.0 GiB hashed"): a report with the
   * same `awaiting` and a new `sofar` continues the wait (its time keeps running) rather than starting one.
   */
  sofar?: string;
}

export type ProgressSink = (wait: StepWait) => void;

/** What a live line can be about: an engine machine's step, or a KV-transfer proof of a pair (named by its decode). */
export type ProgressStep = Step | "kv-proof";

/** A step of one engine beginning, waiting on something, or ending (how long it ran; why it failed, if it did). */
export type StepProgress =
  | { kind: "begin"; step: ProgressStep }
  | { kind: "wait"; step: ProgressStep; wait: StepWait }
  | { kind: "end"; step: ProgressStep; seconds: number; failure?: { reason: string } };

/** The log's line of a wait: "waiting for /health to answer 200 at http://h:1/health, up to 180 s". */
export function waitLogLine(wait: StepWait): string {
  const bound = wait.limitMs === null ? "" : `, up to ${Math.round(wait.limitMs / 1000)} s`;
  return `waiting for ${wait.awaiting}${wait.at ? ` at ${wait.at}` : ""}${bound}${wait.sofar ? `: ${wait.sofar}` : ""}`;
}
