// Typed errors. Every error narwhal raises says whether trying again can help
// (`retryable`), and where it can, names the engine, the step, the input at
// fault and the fix — the way the seeds word their instructions. The CLI is
// the one place that turns these into exit codes (src/cli/exit-codes.ts).

export type Step =
  | "load"
  | "validate"
  | "inspect"
  | "prepare"
  | "check"
  | "start"
  | "probe"
  | "capture"
  | "stop"
  | "observe"
  | "state";

export interface ErrorDetails {
  engine?: string;
  step?: Step;
  /** The input at fault: a file and JSON path, a variable, a flag, a port. */
  input?: string;
  /** What the operator should do, in the imperative. */
  fix?: string;
  retryable?: boolean;
  cause?: unknown;
}

export class NarwhalError extends Error {
  readonly retryable: boolean;
  readonly engine?: string;
  readonly step?: Step;
  readonly input?: string;
  readonly fix?: string;

  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.retryable = details.retryable ?? false;
    this.engine = details.engine;
    this.step = details.step;
    this.input = details.input;
    this.fix = details.fix;
  }

  /** One line an operator can act on: "engine-1 check: <message> (input: X). Fix: Y." */
  describe(): string {
    const where = [this.engine, this.step].filter(Boolean).join(" ");
    const parts = [where ? `${where}: ${this.message}` : this.message];
    if (this.input) parts.push(`(input: ${this.input})`);
    let line = parts.join(" ");
    if (this.fix) line += ` Fix: ${this.fix}`;
    return line;
  }

  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      message: this.message,
      retryable: this.retryable,
      engine: this.engine,
      step: this.step,
      input: this.input,
      fix: this.fix,
    };
  }
}

/** One problem found in the desired state, with the file and JSON path at fault. */
export interface ValidationIssue {
  file: string;
  /** JSON path such as `$.engines["engine-1"].gpu_ids[0]`. */
  path: string;
  message: string;
  /** Name of the cross-record rule or "schema"/"syntax". */
  rule: string;
}

/** The desired state is invalid; carries every issue found, never just the first. */
export class DesiredStateError extends NarwhalError {
  readonly issues: ValidationIssue[];
  constructor(issues: ValidationIssue[]) {
    super(
      `desired state is invalid (${issues.length} error${issues.length === 1 ? "" : "s"})`,
      { step: "validate", retryable: false, fix: "Correct each named input; nothing was started or stopped." },
    );
    this.issues = issues;
  }
  override describe(): string {
    return [super.describe(), ...this.issues.map((i) => `  ${i.file} ${i.path}: ${i.message} [${i.rule}]`)].join("\n");
  }
  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), issues: this.issues };
  }
}

/** A step of the engine procedure failed. */
export class PhaseError extends NarwhalError {
  constructor(engine: string, step: Step, message: string, details: Omit<ErrorDetails, "engine" | "step"> = {}) {
    super(message, { ...details, engine, step });
  }
}

/** Another controller holds the state directory. */
export class LockHeldError extends NarwhalError {}

/**
 * The state file cannot be used as it is: not a regular file ("refused"), not a
 * narwhal state file ("corrupt"), or of another version ("unsupported"). A
 * controller sets the first two aside and rebuilds from what it observes.
 */
export class StateFileError extends NarwhalError {
  constructor(
    readonly kind: "refused" | "corrupt" | "unsupported",
    message: string,
    details: ErrorDetails,
  ) {
    super(message, { ...details, step: "state" });
  }
}

/** An operation was cancelled through its AbortSignal (controller shutdown, desired change). */
export class CancelledError extends NarwhalError {
  constructor(what: string) {
    super(`${what} was cancelled`, { retryable: true });
  }
}

/** Plain-object form of any thrown value, safe to persist (no stack, no secrets added). */
export interface ErrorRecord {
  name: string;
  message: string;
  retryable: boolean;
  engine?: string;
  step?: Step;
  input?: string;
  fix?: string;
}

export function toErrorRecord(err: unknown): ErrorRecord {
  // Duck-typed, not instanceof: errors may come from another copy of this module (a bundled tool).
  if (err && typeof err === "object" && "toJSON" in err && typeof (err as { toJSON: unknown }).toJSON === "function") {
    const r = (err as { toJSON(): Record<string, unknown> }).toJSON();
    if (typeof r.message === "string") return Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as unknown as ErrorRecord;
  }
  const e = err as { name?: string; message?: string } | undefined;
  return { name: e?.name ?? "Error", message: e?.message ?? String(err), retryable: true };
}
