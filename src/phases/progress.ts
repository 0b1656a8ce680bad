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
}

export type ProgressSink = (wait: StepWait) => void;

/** A step of one engine beginning, waiting on something, or ending. */
export type StepProgress =
  | { kind: "begin"; step: Step }
  | { kind: "wait"; step: Step; wait: StepWait }
  | { kind: "end"; step: Step; ok: boolean };
