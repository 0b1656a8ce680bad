// What a controller run reports as it goes, for whoever watches it (watch mode's
// Prometheus metrics, src/metrics/controller-metrics.ts). Every call is
// synchronous and must not throw: observing never changes what the controller does.
import type { Step } from "../errors.js";
import type { KvIo } from "./kv-proofs.js";

export interface ControllerObserver {
  /** An engine's transition, after it was persisted. */
  transition(engine: string, from: string, to: string): void;
  /** One phase step ended: how long it ran; `failure` names why it failed (absent: it succeeded). */
  step(engine: string, step: Step, seconds: number, failure?: { reason: string }): void;
  /** One KV-transfer proof ended: "passed", or the cause it failed with. */
  kvProof(result: string): void;
  /** One run of a work-queue key ended ("fleet": observe and plan; "engine": execute; "kv-watch": scrape). */
  reconciled(kind: "fleet" | "engine" | "kv-watch", seconds: number, ok: boolean): void;
  /** One write of the state file ended. */
  stateWritten(seconds: number, ok: boolean): void;
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

/** The KV IO with every proof's result told to the observer; one that throws counts as runProof records it. */
export function observedKv(io: KvIo, observer: ControllerObserver | undefined): KvIo {
  if (!observer) return io;
  return {
    scrape: io.scrape,
    prove: async (prefill, decode, opts) => {
      try {
        const result = await io.prove(prefill, decode, opts);
        observer.kvProof(result.passed ? "passed" : (result.cause ?? "failed"));
        return result;
      } catch (err) {
        if (!opts.signal?.aborted) observer.kvProof("request-failed");
        throw err;
      }
    },
  };
}
