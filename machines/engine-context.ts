// The engine machine's data: its context, events and inputs, and the pure
// helpers its actions use. Split from engine.ts so the machine definition reads
// as the procedure itself. Pure: no IO.
import type { ErrorRecord } from "../src/errors.js";
import type { CacheLayout, CheckResult, EngineHandle, Inspection, PreparedRun, ProbeResult } from "../src/phases/types.js";

export type Phase = "pending" | "inspected" | "prepared" | "checked" | "started" | "probed" | "captured";
export type RetryFrom = Exclude<Phase, "captured"> | "removing";

export interface RetryPolicy {
  baseMs: number;
  capMs: number;
  maxAttempts: number;
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
  | { type: "RESUME" };

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
export function backoffMs(attempts: number, policy: RetryPolicy, random: number): number {
  const step = Math.min(policy.capMs, policy.baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(step * (0.5 + random / 2));
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
    retry: input.retry,
  };
}

/** States in which the engine needs nothing more until an event arrives. */
export function isSettled(value: string, context: EngineContext): boolean {
  return value === "captured" || value === "removed" || (value === "failed" && context.terminal);
}
