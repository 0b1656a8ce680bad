// Host inspection reports every problem it finds at once, so an operator fixes
// a host in one pass instead of one reconcile per fault. Each problem carries
// the input at fault and the fix, and its failure class; the aggregate is
// terminal if any problem is (a hardware mismatch stays), else retried with a
// budget if any is (a tool that timed out), else outwaited (a stranger's port,
// a missing device: re-checked until they clear).

import { CancelledError, NarwhalError, NodeAccessError, PhaseError, type FailureClass } from "../errors.js";

export interface InspectionProblem {
  message: string;
  /** The input at fault: a spec field, node field or port. */
  input: string;
  /** What the operator should do, in the imperative. */
  fix: string;
  failure: FailureClass;
}

function worst(problems: InspectionProblem[]): FailureClass {
  const classes = new Set(problems.map((p) => p.failure));
  // No problem at all (an inspection that observed nothing) is no cause to wait for.
  if (problems.length === 0 || classes.has("terminal")) return "terminal";
  return classes.has("retry") ? "retry" : "outwait";
}

/** The inspect step failed; `problems` lists each finding, the message prints them all. */
export class InspectionError extends PhaseError {
  readonly problems: InspectionProblem[];
  constructor(engine: string, problems: InspectionProblem[]) {
    const only = problems.length === 1 ? problems[0] : undefined;
    const message = only
      ? only.message
      : `host inspection found ${problems.length} problems:\n` +
        problems.map((p, i) => `  ${i + 1}. ${p.message} (input: ${p.input}) Fix: ${p.fix}`).join("\n");
    super(engine, "inspect", message, {
      input: only ? only.input : problems.map((p) => p.input).join("; "),
      // With several problems each fix sits beside its problem in the message.
      fix: only ? only.fix : "Resolve each listed problem; narwhal inspects the host again afterwards.",
      failure: worst(problems),
    });
    this.problems = problems;
  }
  /** Several problems: the message already names each input and fix, so nothing is appended. */
  override describe(): string {
    if (this.problems.length === 1) return super.describe();
    return `${this.engine} ${this.step}: ${this.message}`;
  }
  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), problems: this.problems };
  }
}

/**
 * Turn a failure from a host probe into a problem. Cancellation is not a
 * problem with the host, and a node that cannot be reached (or refuses narwhal)
 * is not one the host shows: both are rethrown so the caller stops at once and
 * reports them as what they are (the node's reachability, not its hardware).
 */
export function problemFromError(err: unknown, fallbackInput: string): InspectionProblem {
  if (err instanceof CancelledError || err instanceof NodeAccessError) throw err;
  if (err instanceof NarwhalError) {
    return {
      message: err.message,
      input: err.input ?? fallbackInput,
      fix: err.fix ?? "Inspect the host and reconcile again.",
      failure: err.failure,
    };
  }
  return {
    message: err instanceof Error ? err.message : String(err),
    input: fallbackInput,
    fix: "Inspect the host and reconcile again.",
    failure: "retry",
  };
}
