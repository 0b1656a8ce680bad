// The engine machine's context updates that compute something: a loss, a
// deferred desired-state event, retiring the running engine for a new desired
// state and restoring it when the desired state reverts. Named pure functions
// so engine.ts reads as the procedure; time and randomness come in as
// arguments. Pure: no IO.
import { EngineLost, nodeFaultOf, toErrorRecord, type ErrorRecord } from "../src/errors.js";
import {
  backoffMs,
  notWaiting,
  STABLE_RUN_MS,
  type EngineContext,
  type EngineEvent,
  type Retiring,
  type RetryFrom,
} from "./engine-context.js";

/** The engine died: a failure of its own (step "observe"), retried from a fresh run with backoff. */
export function lossUpdate(
  context: EngineContext,
  reason: string,
  now: number,
  random: number,
): Partial<EngineContext> {
  // An engine that served for a stable run before it died is not crash-looping: its budget starts over.
  const stable = context.capturedAt !== null && now - context.capturedAt > STABLE_RUN_MS;
  const attempts = (stable ? 0 : context.attempts) + 1;
  const terminal = attempts >= context.retry.maxAttempts;
  return {
    handle: null,
    runningHash: null,
    error: toErrorRecord(new EngineLost(context.engine, "observe", reason)),
    attempts,
    terminal,
    ...notWaiting,
    retryFrom: "pending",
    retryAt: terminal ? null : now + backoffMs(attempts, context.retry, random),
  };
}

/** What is held after a desired-state event arrives during a step that cannot be abandoned halfway. */
export function deferredAfter(deferred: EngineContext["deferred"], event: EngineEvent): EngineContext["deferred"] {
  return {
    ...deferred,
    ...(event.type === "REMOVE" ? { remove: true } : {}),
    ...(event.type === "DESIRED_CHANGED" ? { desiredHash: event.desiredHash } : {}),
  };
}

/** The event to replay once the step settles: a removal wins; a desired hash only if it differs from the current one. */
export function replayOf(context: EngineContext): EngineEvent | null {
  const d = context.deferred;
  if (!d) return null;
  if (d.remove) return { type: "REMOVE" };
  if (d.desiredHash !== undefined && d.desiredHash !== context.desiredHash)
    return { type: "DESIRED_CHANGED", desiredHash: d.desiredHash };
  return null;
}

/** Whether the desired state went back to what the retiring engine serves, with the evidence to resume it as is. */
export function restoresRetiring(context: EngineContext, desiredHash: string): boolean {
  return !!context.retiring?.restorable && desiredHash === context.retiring.hash;
}

/** Keep the retiring engine as the live one (it is captured) and drop the replacement. Call only when restoresRetiring. */
export function restoreRetiring(context: EngineContext): Partial<EngineContext> {
  const retiring = context.retiring!;
  return {
    ...retiring.restorable!,
    desiredHash: retiring.hash!,
    handle: retiring.handle,
    run: retiring.run,
    runningHash: retiring.hash!,
    retiring: null,
    attempts: 0,
  };
}

/**
 * A new input hash invalidates everything from inspection on. A running engine is kept as
 * `retiring` (with its evidence if it was captured) until the new plan is checked.
 */
export function retireForChange(context: EngineContext, desiredHash: string): Partial<EngineContext> {
  return {
    desiredHash,
    retiring: context.handle ? retiringOf(context, context.handle) : context.retiring,
    handle: null,
    attempts: 0,
    error: null,
    terminal: false,
    retryAt: null,
    ...notWaiting,
  };
}

function retiringOf(context: EngineContext, handle: Retiring["handle"]): Retiring {
  const { inspection, checked, probe, layout } = context;
  return {
    handle,
    run: context.run,
    hash: context.runningHash,
    restorable: layout ? { inspection, checked, probe, layout } : null,
  };
}

/** Reaching `captured`: the failure streak's bookkeeping clears; attempts are kept (lossUpdate resets them after a stable run). */
export function capturedUpdate(now: number): Partial<EngineContext> {
  return { error: null, retryFrom: null, retryAt: null, terminal: false, ...notWaiting, capturedAt: now };
}

/** The retiring engine is stopped: nothing is left to keep serving or to restore, and what was deferred is taken. */
export const retiredUpdate = { retiring: null, runningHash: null, deferred: null } as const;

/**
 * Where a failed step resumes, and whether the engine it started is dropped with it. A start that
 * fails is spent (`dropsEngine`: the retry prepares a fresh run), except when its node could not be
 * used: the connection may have dropped after the engine was spawned there, and only this run's
 * launch token finds it again (the backend adopts it), so the retry starts from the same run,
 * never a second engine beside the first. Every other step keeps its handle and run as they are.
 */
export function resumeAfter(
  params: { from: RetryFrom; dropsEngine?: boolean },
  error: ErrorRecord,
): Pick<EngineContext, "retryFrom"> & Partial<Pick<EngineContext, "handle" | "runningHash">> {
  // A step on the running engine found it gone (phase-actors.ts): a loss, retried as ENGINE_LOST is.
  if (error.name === EngineLost.name) return { retryFrom: "pending", handle: null, runningHash: null };
  if (!params.dropsEngine) return { retryFrom: params.from };
  if (nodeFaultOf(error) !== null) return { retryFrom: "checked" };
  return { retryFrom: params.from, handle: null, runningHash: null };
}
