// The engine machine's data: its context, events and inputs, and the pure
// helpers its actions use. Split from engine.ts so the machine definition reads
// as the procedure itself. Pure: no IO.
import { failureOf, type ErrorRecord } from "../src/errors.js";
import type {
  CacheLayout,
  CheckResult,
  EngineHandle,
  Inspection,
  PreparedRun,
  ProbeResult,
} from "../src/phases/types.js";

export type Phase = "pending" | "inspected" | "prepared" | "checked" | "started" | "probed" | "captured";
export type RetryFrom = Exclude<Phase, "captured"> | "removing";

export interface RetryPolicy {
  baseMs: number;
  capMs: number;
  maxAttempts: number;
  /**
   * Longest pause between re-checks of a cause narwhal outwaits (the resync cadence in watch
   * mode); default capMs.
   */
  outwaitCapMs?: number;
  /**
   * How long one outwaited cause may last before the engine is given up on (reconcile --once);
   * null or absent: for as long as it lasts (watch mode).
   */
  outwaitForMs?: number | null;
}

/** An engine that served this long before it died is not crash-looping: its restart budget starts over. */
export const STABLE_RUN_MS = 10 * 60_000;

export interface EngineContext {
  engine: string;
  desiredHash: string;
  inspection: Inspection | null;
  run: PreparedRun | null;
  checked: CheckResult | null;
  handle: EngineHandle | null;
  /** Input hash the live engine was prepared from. */
  runningHash: string | null;
  /**
   * The engine being replaced: it keeps serving while the new plan is
   * inspected, prepared and checked, and is stopped just before the new one
   * starts. An invalid or failing new plan therefore never takes it down.
   */
  retiring: Retiring | null;
  probe: ProbeResult | null;
  layout: CacheLayout | null;
  error: ErrorRecord | null;
  /** Where a retry resumes. */
  retryFrom: RetryFrom | null;
  /**
   * Desired-state events that arrived while a step that cannot be abandoned halfway (start,
   * stopping the retiring engine) was running: applied as soon as it settles, so nothing it
   * started is forgotten and nothing it is stopping is kept.
   */
  deferred: { desiredHash?: string; remove?: boolean } | null;
  /** Consecutive failures since the engine last reached `captured`. */
  attempts: number;
  /** Backoff deadline (epoch ms); kept in context so it survives a restart. */
  retryAt: number | null;
  /** When the engine last reached `captured` (epoch ms): a crash after a stable run starts a fresh budget. */
  capturedAt: number | null;
  terminal: boolean;
  /**
   * Since when (epoch ms) the engine has been outwaiting a cause outside narwhal's control, and
   * how many re-checks failed since: they pace the re-checks and bound them in --once; they
   * never count as attempts. Absent in snapshots written before outwaiting existed.
   */
  waitingSince?: number | null;
  waits?: number;
  /**
   * `narwhal suspend` holds the engine (sent as SUSPENSION by the controller, which reads the state):
   * observed, never changed, so the backoff timer moves it nowhere; retryAt is kept, and on resume
   * the retry runs at that deadline, or at once if it has passed. Absent: not suspended.
   */
  suspended?: boolean;
  retry: RetryPolicy;
}

/** The engine a replacement will stop, and what to restore if the desired state reverts to it. */
export interface Retiring {
  handle: EngineHandle;
  run: PreparedRun | null;
  /** The input hash it serves. */
  hash?: string | null;
  /** Its captured evidence, when it had reached `captured`: reverting the desired state resumes it as is. */
  restorable?: Pick<EngineContext, "inspection" | "checked" | "probe" | "layout"> | null;
}

export interface EngineInput {
  engine: string;
  desiredHash: string;
  retry: RetryPolicy;
}

export type EngineEvent =
  | { type: "DESIRED_CHANGED"; desiredHash: string }
  | { type: "REMOVE" }
  | { type: "ENGINE_LOST"; reason: string }
  | { type: "RETRY" }
  /** The engine kept serving during a replacement was found gone: the replacement goes on without it. */
  | { type: "RETIRING_LOST" }
  | { type: "RESUME" }
  /** `narwhal suspend` (true) or `resume` (false) of this engine, as the state now records it. */
  | { type: "SUSPENSION"; suspended: boolean };

/** Inputs the named actors receive (plain data; the controller looks up the spec). */
export interface StepInput {
  engine: string;
  desiredHash: string;
  inspection: Inspection | null;
  run: PreparedRun | null;
  handle: EngineHandle | null;
  retiring: EngineContext["retiring"];
}

/** Capped exponential backoff with jitter (50–100% of the step), pure given `random`. */
export function backoffMs(attempts: number, policy: Pick<RetryPolicy, "baseMs" | "capMs">, random: number): number {
  const step = Math.min(policy.capMs, policy.baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(step * (0.5 + random / 2));
}

/** The pause before the next re-check of an outwaited cause: the same backoff, capped at the outwait cadence. */
export function outwaitMs(waits: number, policy: RetryPolicy, random: number): number {
  return backoffMs(waits, { baseMs: policy.baseMs, capMs: policy.outwaitCapMs ?? policy.capMs }, random);
}

/** A streak of outwaited failures ends: at a success, a fresh attempt or a new desired state. */
export const notWaiting = { waitingSince: null, waits: 0 } as const;

type FailureUpdate = Pick<EngineContext, "error" | "attempts" | "terminal" | "retryAt" | "waitingSince" | "waits">;

/**
 * What a failed step does to the budget, by the failure's class (src/errors.ts): a terminal
 * failure stops at once; a retryable one uses an attempt; an outwaited one uses none and is
 * re-checked until it clears, or, with a bound (reconcile --once), until the bound has passed.
 * Pure given `now` and `random`.
 */
export function afterFailure(context: EngineContext, error: ErrorRecord, now: number, random: number): FailureUpdate {
  const failure = failureOf(error);
  if (failure === "outwait") {
    const waitingSince = context.waitingSince ?? now;
    const waits = (context.waits ?? 0) + 1;
    const bound = context.retry.outwaitForMs ?? null;
    if (bound !== null && now - waitingSince >= bound) {
      const waited = `${Math.round((now - waitingSince) / 1000)} s`;
      const message = `${error.message} (unchanged after outwaiting it for ${waited}, the bound of reconcile --once; watch mode outwaits it for as long as it lasts)`;
      return {
        error: { ...error, message },
        attempts: context.attempts,
        terminal: true,
        retryAt: null,
        waitingSince,
        waits,
      };
    }
    return {
      error,
      attempts: context.attempts,
      terminal: false,
      retryAt: now + outwaitMs(waits, context.retry, random),
      waitingSince,
      waits,
    };
  }
  const attempts = context.attempts + 1;
  const terminal = failure === "terminal" || attempts >= context.retry.maxAttempts;
  return {
    error,
    attempts,
    terminal,
    retryAt: terminal ? null : now + backoffMs(attempts, context.retry, random),
    ...notWaiting,
  };
}

export const stepInput = ({ context }: { context: EngineContext }): StepInput => ({
  engine: context.engine,
  desiredHash: context.desiredHash,
  inspection: context.inspection,
  run: context.run,
  handle: context.handle,
  retiring: context.retiring,
});

export const freshAttempt = {
  inspection: null,
  run: null,
  checked: null,
  probe: null,
  layout: null,
} as const;

/** A new engine's context: nothing done, nothing running. */
export function initialContext(input: EngineInput): EngineContext {
  return {
    engine: input.engine,
    desiredHash: input.desiredHash,
    ...freshAttempt,
    handle: null,
    runningHash: null,
    retiring: null,
    error: null,
    retryFrom: null,
    deferred: null,
    attempts: 0,
    retryAt: null,
    capturedAt: null,
    terminal: false,
    ...notWaiting,
    retry: input.retry,
  };
}

/** States in which the engine needs nothing more until an event arrives. */
export function isSettled(value: string, context: EngineContext): boolean {
  return value === "captured" || value === "removed" || (value === "failed" && context.terminal);
}
