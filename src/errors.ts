// Typed errors. Every error narwhal raises says whether trying again can help
// (`retryable`), and where it can, names the engine, the step, the input at
// fault and the fix — the way the seeds word their instructions. The CLI is
// the one place that turns these into exit codes (src/cli/exit-codes.ts).

export type Step =
  "load" | "validate" | "inspect" | "prepare" | "check" | "start" | "probe" | "capture" | "stop" | "observe" | "state";

/**
 * What trying again can do about a failure, decided where the error is raised
 * (phases, backends) and applied by the engine machine:
 * - "retry": it may clear by itself (a crash, a deadline): retried with capped
 *   backoff, up to config.retry.maxAttempts;
 * - "terminal": the same inputs fail the same way (a rejected flag, a
 *   trust_remote_code request, a missing interpreter): stopped at once, with the
 *   fix, until the desired state changes (a new input hash is a fresh budget);
 * - "outwait": a cause outside narwhal's control that goes away without a
 *   desired edit (image not on the host, a stranger on a planned port, a missing
 *   device, the Docker daemon down or restarting): re-checked on a capped
 *   cadence without using up attempts, for as long as it lasts in watch mode.
 */
export type FailureClass = "retry" | "terminal" | "outwait";

export interface ErrorDetails {
  engine?: string;
  step?: Step;
  /** The input at fault: a file and JSON path, a variable, a flag, a port. */
  input?: string;
  /** What the operator should do, in the imperative. */
  fix?: string;
  retryable?: boolean;
  /** Overrides `retryable`: "outwait" is retryable without using up attempts. */
  failure?: FailureClass;
  cause?: unknown;
}

export class NarwhalError extends Error {
  readonly retryable: boolean;
  readonly failure: FailureClass;
  readonly engine?: string;
  readonly step?: Step;
  readonly input?: string;
  readonly fix?: string;

  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.failure = details.failure ?? (details.retryable ? "retry" : "terminal");
    this.retryable = this.failure !== "terminal";
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

  /**
   * This error named for the engine and step it was raised in, where it did not know them: a copy
   * of the same class with every field kept (its message, stack, cause, failure class, input, fix).
   */
  within(engine: string, step: Step): this {
    const copy = Object.create(Object.getPrototypeOf(this) as object) as this;
    Object.defineProperties(copy, Object.getOwnPropertyDescriptors(this));
    Object.defineProperties(copy, {
      engine: { value: this.engine ?? engine, enumerable: true },
      step: { value: this.step ?? step, enumerable: true },
    });
    return copy;
  }

  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      message: this.message,
      retryable: this.retryable,
      failure: this.failure,
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
    super(`desired state is invalid (${issues.length} error${issues.length === 1 ? "" : "s"})`, {
      step: "validate",
      retryable: false,
      fix: "Correct each named input; nothing was started or stopped.",
    });
    this.issues = issues;
  }
  override describe(): string {
    return [super.describe(), ...this.issues.map((i) => `  ${i.file} ${i.path}: ${i.message} [${i.rule}]`)].join("\n");
  }
  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), issues: this.issues };
  }
}

/** `narwhal apply` of a saved plan that no longer describes the world: one line per difference. */
export class StalePlanError extends NarwhalError {
  constructor(
    file: string,
    readonly differences: string[],
  ) {
    super(
      `the saved plan is stale: ${differences.length} thing${differences.length === 1 ? "" : "s"} changed since it was made; nothing was started or stopped`,
      {
        step: "validate",
        input: file,
        fix: "Run narwhal plan again, review it, and apply the new plan.",
        retryable: false,
      },
    );
  }
  override describe(): string {
    return [super.describe(), ...this.differences.map((d) => `  ${d}`)].join("\n");
  }
  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), differences: this.differences };
  }
}

/** A step of the engine procedure failed. */
export class PhaseError extends NarwhalError {
  constructor(engine: string, step: Step, message: string, details: Omit<ErrorDetails, "engine" | "step"> = {}) {
    super(message, { ...details, engine, step });
  }
}

/**
 * The engine's process is gone: found by an observation (step "observe") or by a step on the running engine
 * (probe, capture) that failed against it. The engine machine retries it from a fresh run (its run and handle
 * are spent), never the step again: a probe retried against a dead process fails until the budget is gone.
 */
export class EngineLost extends PhaseError {
  constructor(engine: string, step: Step, reason: string) {
    super(engine, step, `the engine is no longer running: ${reason}`, {
      retryable: true,
      fix: "Read engine.log in the run directory for the cause; narwhal restarts the engine from a fresh run with backoff.",
    });
  }
}

/**
 * An error raised inside a step, named for that step: a backend error (a Docker call, a file)
 * knows neither the engine nor the step, and a record without them reads "undefined: ...".
 * Everything else about the error (its failure class, input, fix, its class name) is kept.
 */
export function inStep(err: unknown, engine: string, step: Step): unknown {
  if (err instanceof NarwhalError && err.engine && err.step) return err;
  if (err instanceof CancelledError || (err instanceof Error && err.name === "AbortError")) return err;
  // A typed error keeps its class and its own fields (a NodeAccessError's node and reason): the
  // controller decides on them (NodeReachable, outwaiting), so a copy that only looks alike would not do.
  if (err instanceof NarwhalError) return err.within(engine, step);
  const named = new NarwhalError(err instanceof Error ? err.message : String(err), {
    engine,
    step,
    failure: "retry",
    cause: err,
  });
  named.name = err instanceof Error ? err.name : "Error";
  return named;
}

/** Another controller holds the state directory. */
export class LockHeldError extends NarwhalError {}

/**
 * The command line itself is wrong (an unknown option, a wrong combination or count, a bad value):
 * reported before any file is read or written. `input` names the option at fault.
 */
export class UsageError extends NarwhalError {
  constructor(message: string, details: Pick<ErrorDetails, "input" | "fix" | "engine"> = {}) {
    super(message, { ...details, retryable: false });
  }
}

/** A file could not be read or written (state, lock, log, run directory): names the path and the errno. */
export class IoError extends NarwhalError {
  readonly path: string;
  readonly code: string;
  constructor(message: string, details: ErrorDetails & { path: string; code: string }) {
    // The path is in the message already; `input` is set only when the input at fault is another thing.
    super(message, details);
    this.path = details.path;
    this.code = details.code;
  }
  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), path: this.path, code: this.code };
  }
}

const IO_FIX: Record<string, string> = {
  EROFS: "The file system is mounted read-only: remount it read-write, or choose another --state directory.",
  EACCES: "Give narwhal's user write access to that directory, or choose another --state directory.",
  EPERM:
    "The file is immutable or the operation is not permitted there (chattr -i, mount options), or choose another --state directory.",
  ENOSPC: "Free space on that file system (or raise its quota), then run the command again.",
  EDQUOT: "Free space on that file system (or raise its quota), then run the command again.",
};

/**
 * The typed form of a failed file-system call (a Node errno error: code, syscall, path), e.g.
 * "cannot open /srv/state/controller.lock: EROFS (read-only file system)". Anything else is returned unchanged.
 */
export function ioFailure(err: unknown, details: ErrorDetails = {}): unknown {
  if (err instanceof NarwhalError) return err;
  const e = err as NodeJS.ErrnoException | undefined;
  if (!e || typeof e.code !== "string" || typeof e.path !== "string") return err;
  // Node's message reads "EROFS: read-only file system, open '/x'": keep the errno's words.
  const words = /^[A-Z0-9_]+: ([^,]+)/.exec(e.message ?? "")?.[1] ?? e.message;
  // rename and link name both ends: the target (dest) is usually the file the operator knows.
  const dest = (e as { dest?: unknown }).dest;
  const where = typeof dest === "string" ? `${e.path} to ${dest}` : e.path;
  return new IoError(`cannot ${e.syscall ?? "access"} ${where}: ${e.code} (${words})`, {
    retryable: false,
    fix: IO_FIX[e.code] ?? "Correct the named path, then run the command again.",
    ...details,
    path: e.path,
    code: e.code,
    cause: err,
  });
}

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
  /** Absent in records written before failure classes: derived from `retryable`. */
  failure?: FailureClass;
  engine?: string;
  step?: Step;
  input?: string;
  fix?: string;
  /** A node-access failure (NodeAccessError.toJSON): the node, its ssh destination and why it cannot be used. */
  node?: string;
  destination?: string;
  reason?: NodeAccessReason;
}

/** How the machine treats a recorded failure. */
export function failureOf(record: Pick<ErrorRecord, "retryable" | "failure">): FailureClass {
  return record.failure ?? (record.retryable ? "retry" : "terminal");
}

export function toErrorRecord(err: unknown): ErrorRecord {
  // Duck-typed, not instanceof: errors may come from another copy of this module (a bundled tool).
  if (err && typeof err === "object" && "toJSON" in err && typeof (err as { toJSON: unknown }).toJSON === "function") {
    const r = (err as { toJSON(): Record<string, unknown> }).toJSON();
    if (typeof r.message === "string")
      return Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as unknown as ErrorRecord;
  }
  const e = err as { name?: string; message?: string } | undefined;
  return { name: e?.name ?? "Error", message: e?.message ?? String(err), retryable: true };
}

/** One line for a log: a NarwhalError's describe(), a file-system error by path and errno, else its message. */
export function describeFailure(err: unknown): string {
  const failure = ioFailure(err);
  return failure instanceof NarwhalError ? failure.describe() : String((failure as Error)?.message ?? failure);
}

/** Why a node cannot be used: the controller's NodeReachable=False condition carries it as its reason. */
export type NodeAccessReason = "unreachable" | "host-key" | "auth";

/** A node could not be reached or refused narwhal (host access over SSH); names the node and its destination. */
export class NodeAccessError extends NarwhalError {
  constructor(
    readonly node: string,
    readonly destination: string,
    readonly reason: NodeAccessReason,
    message: string,
    details: ErrorDetails,
  ) {
    super(message, { ...details, input: details.input ?? `node ${node} ssh.destination ${destination}` });
  }
  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), node: this.node, destination: this.destination, reason: this.reason };
  }
}

/** Connection refused, timed out, no route, name not known, dropped: outwaited, the node may come back. */
export class NodeUnreachable extends NodeAccessError {}
/** The node's host key is unknown or changed: terminal until the operator verifies it and updates known_hosts. */
export class HostKeyRejected extends NodeAccessError {}
/** The node refused narwhal's key: terminal until the identity file or authorized_keys is fixed. */
export class NodeAuthFailed extends NodeAccessError {}

/** A node that could not be used, as NodeReachable=False and the planner read it. */
export interface NodeFault {
  node: string;
  reason: NodeAccessReason;
  message: string;
}

const NODE_ACCESS_REASONS: readonly string[] = ["unreachable", "host-key", "auth"] satisfies NodeAccessReason[];

/**
 * The node fault a thrown error or a recorded one stands for, else null. Duck-typed, as
 * toErrorRecord is: a record read back from the state file is no NodeAccessError instance.
 */
export function nodeFaultOf(err: unknown): NodeFault | null {
  if (!err || typeof err !== "object") return null;
  const e = err as { node?: unknown; reason?: unknown; message?: unknown };
  if (typeof e.node !== "string" || typeof e.reason !== "string" || !NODE_ACCESS_REASONS.includes(e.reason))
    return null;
  return {
    node: e.node,
    reason: e.reason as NodeAccessReason,
    message: typeof e.message === "string" ? e.message : "",
  };
}
