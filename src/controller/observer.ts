// What a controller run reports as it goes, for whoever watches it: watch mode's
// Prometheus metrics (src/metrics/controller-metrics.ts) and the live view of a
// reconcile on a terminal (src/cli/progress-tty.ts) are two subscribers of this
// one channel, so a step's beginning, waits and end reach both from one call.
// Every call is synchronous and must not throw: observing never changes what the
// controller does.
import type { KvIo } from "./kv-proofs.js";
import type { StepProgress, StepWait } from "../phases/progress.js";

export interface ControllerObserver {
  /** An engine's transition, after it was persisted. */
  transition(engine: string, from: string, to: string): void;
  /** A step of an engine began, waits on something, or ended (how long it ran; why it failed). */
  step(engine: string, p: StepProgress): void;
  /** One KV-transfer proof ended: "passed", or the cause it failed with. */
  kvProof(result: string): void;
  /** One run of a work-queue key ended ("fleet": observe and plan; "engine": execute; "kv-watch": scrape). */
  reconciled(kind: "fleet" | "engine" | "kv-watch", seconds: number, ok: boolean): void;
  /** One write of the state file ended. */
  stateWritten(seconds: number, ok: boolean): void;
}

/** A subscriber hears what it implements; the rest passes it by. */
export type ObserverSubscriber = Partial<ControllerObserver>;

/** One observer telling every subscriber, in order; undefined when there is none (nothing to tell). */
export function fanOut(...subscribers: Array<ObserverSubscriber | null | undefined>): ControllerObserver | undefined {
  const subs = subscribers.filter((s): s is ObserverSubscriber => !!s);
  if (subs.length === 0) return undefined;
  return {
    transition: (engine, from, to) => subs.forEach((s) => s.transition?.(engine, from, to)),
    step: (engine, p) => subs.forEach((s) => s.step?.(engine, p)),
    kvProof: (result) => subs.forEach((s) => s.kvProof?.(result)),
    reconciled: (kind, seconds, ok) => subs.forEach((s) => s.reconciled?.(kind, seconds, ok)),
    stateWritten: (seconds, ok) => subs.forEach((s) => s.stateWritten?.(seconds, ok)),
  };
}

/** Seconds since `start` (a performance.now() reading). */
export function secondsSince(start: number): number {
  return (performance.now() - start) / 1000;
}

/** A work-queue run, told to the observer with how long it took and whether it failed (rethrown: the queue retries it). */
export async function timed(
  observer: ControllerObserver | undefined,
  kind: "fleet" | "engine" | "kv-watch",
  run: () => Promise<void>,
): Promise<void> {
  const began = performance.now();
  try {
    await run();
  } catch (err) {
    observer?.reconciled(kind, secondsSince(began), false);
    throw err;
  }
  observer?.reconciled(kind, secondsSince(began), true);
}

/**
 * The KV IO with every proof told to the observer: its live line on the decode's row while it runs
 * (what the pair awaits, within the proof's deadline), and its result; one that throws counts as
 * runProof records it.
 */
export function observedKv(io: KvIo, observer: ControllerObserver | undefined): KvIo {
  if (!observer) return io;
  return {
    scrape: io.scrape,
    prove: async (prefill, decode, opts) => {
      const began = performance.now();
      const end = (failure?: { reason: string }) =>
        observer.step(decode.engine, {
          kind: "end",
          step: "kv-proof",
          seconds: secondsSince(began),
          ...(failure ? { failure } : {}),
        });
      observer.step(decode.engine, { kind: "begin", step: "kv-proof" });
      observer.step(decode.engine, {
        kind: "wait",
        step: "kv-proof",
        wait: kvProofWait(prefill.engine, decode.engine, opts.timeoutMs),
      });
      try {
        const result = await io.prove(prefill, decode, opts);
        const verdict = result.passed ? "passed" : (result.cause ?? "failed");
        end(result.passed ? undefined : { reason: verdict });
        observer.kvProof(verdict);
        return result;
      } catch (err) {
        end({ reason: "request-failed" });
        if (!opts.signal?.aborted) observer.kvProof("request-failed");
        throw err;
      }
    },
  };
}

/** "a KV transfer prefill-1 → decode-1 to be proven", within the proof's deadline. */
export function kvProofWait(prefill: string, decode: string, timeoutMs: number): StepWait {
  return { awaiting: `a KV transfer ${prefill} → ${decode} to be proven`, limitMs: timeoutMs };
}
