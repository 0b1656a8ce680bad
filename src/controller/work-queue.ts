// A keyed, rate-limited work queue in the spirit of controller-runtime's: the
// controller asks for "reconcile engine-3" as often as events arrive, and the
// queue turns that into at most one pending and one running reconcile per key,
// a bounded number of keys at once, and per-key backoff after a failure. The
// reconcile itself decides what to do; the queue only decides when it runs.
import { backoffMs } from "../../machines/engine-context.js";
import { NarwhalError } from "../errors.js";

const MAX_TIMER_MS = 2 ** 31 - 1;

export type Reconcile = (key: string, signal: AbortSignal) => Promise<void>;

export interface WorkQueueOptions {
  /** Most keys reconciled at once (>= 1), in each lane. */
  concurrency: number;
  /**
   * The lane a key's slots come from: each lane has `concurrency` slots of its own, so long work in
   * one (KV proofs) never holds up another (engine steps). null: the key never waits for a slot (the
   * controller's own observe-and-plan, which must not queue behind the work it hands out). Default:
   * one lane for every key.
   */
  lane?: (key: string) => string | null;
  /** Per-key backoff after a failed reconcile: base and cap (ms); jittered 50–100%; reset by a success. */
  retry: { baseMs: number; capMs: number };
  /** Each failure, before the key is re-queued with backoff. */
  onError?: (key: string, err: unknown, failures: number) => void;
  /** For tests: a source of randomness (default Math.random). */
  random?: () => number;
}

interface Running {
  controller: AbortController;
  /** Settles (never rejects) when the reconcile has finished and the key's bookkeeping is done. */
  done: Promise<void>;
}

interface Delayed {
  at: number;
  timer: NodeJS.Timeout;
}

export class WorkQueue {
  /** Waiting to run, in request order (a Set keeps insertion order and deduplicates). */
  readonly #pending = new Set<string>();
  readonly #running = new Map<string, Running>();
  /** Running keys by lane (keys of a null lane are not counted: they take no slot). */
  readonly #busy = new Map<string, number>();
  /** Requested while running: run once more when the current run settles. */
  readonly #dirty = new Set<string>();
  readonly #delayed = new Map<string, Delayed>();
  /** Consecutive failures per key; a success deletes the entry. */
  readonly #failures = new Map<string, number>();
  #idleWaiters: Array<() => void> = [];
  #closed = false;
  /** Guards #pump against re-entry from a reconcile that calls add() synchronously. */
  #pumping = false;
  readonly #reconcile: Reconcile;
  readonly #opts: WorkQueueOptions;
  readonly #random: () => number;

  constructor(reconcile: Reconcile, opts: WorkQueueOptions) {
    if (!Number.isInteger(opts.concurrency) || opts.concurrency < 1) {
      throw new NarwhalError(`work queue concurrency must be an integer >= 1, got ${opts.concurrency}`, {
        input: "WorkQueueOptions.concurrency",
        fix: "Pass a concurrency of at least 1.",
      });
    }
    if (!(opts.retry.baseMs > 0) || !(opts.retry.capMs >= opts.retry.baseMs)) {
      throw new NarwhalError(
        `work queue retry needs 0 < baseMs <= capMs, got baseMs ${opts.retry.baseMs}, capMs ${opts.retry.capMs}`,
        { input: "WorkQueueOptions.retry", fix: "Pass a positive baseMs and a capMs no smaller than it." },
      );
    }
    this.#reconcile = reconcile;
    this.#opts = opts;
    this.#random = opts.random ?? Math.random;
  }

  /** Request a reconcile of key: deduplicated (a key pending once is pending once), single-flight (a key never runs twice at once: a request while it runs makes it run once more after), no-op after shutdown. */
  add(key: string): void {
    if (this.#closed) return;
    this.#clearDelayed(key);
    if (this.#running.has(key)) {
      this.#dirty.add(key);
      return;
    }
    this.#pending.add(key);
    this.#pump();
  }

  /** Request after ms (a later request for an already-scheduled key keeps the earliest time; add() runs it now). */
  addAfter(key: string, ms: number): void {
    if (this.#closed) return;
    if (!(ms > 0)) return this.add(key);
    // Already due now (pending, or to run again right after its current run): now is earliest.
    if (this.#pending.has(key) || this.#dirty.has(key)) return;
    // Node fires a timer longer than 2^31-1 ms at once: clamp, so "much later" never means "now".
    ms = Math.min(ms, MAX_TIMER_MS);
    const at = Date.now() + ms;
    const existing = this.#delayed.get(key);
    if (existing && existing.at <= at) return;
    this.#clearDelayed(key);
    const timer = setTimeout(() => {
      this.#delayed.delete(key);
      this.add(key);
    }, ms);
    this.#delayed.set(key, { at, timer });
  }

  /** Keys waiting to run (pending, not running, not delayed). */
  get depth(): number {
    return this.#pending.size;
  }

  /** Keys scheduled for later (backoff or addAfter). */
  get delayed(): number {
    return this.#delayed.size;
  }

  /** Keys running now. */
  get running(): number {
    return this.#running.size;
  }

  /** Whether shutdown() was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Resolves when nothing is pending or running (delayed keys do not count); resolves at once if so. */
  idle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Stop taking work (pending and delayed keys are dropped), abort the running reconciles' signals, and resolve when they have settled or after graceMs, whichever first; never rejects. */
  async shutdown(graceMs: number): Promise<void> {
    this.#closed = true;
    this.#pending.clear();
    this.#dirty.clear();
    for (const key of [...this.#delayed.keys()]) this.#clearDelayed(key);
    const runs = [...this.#running.values()];
    for (const run of runs) run.controller.abort(new Error("work queue shut down"));
    this.#settleIdle();
    if (runs.length === 0) return;
    let grace: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => {
      grace = setTimeout(resolve, Math.max(0, graceMs));
    });
    try {
      await Promise.race([Promise.all(runs.map((r) => r.done)), graceOver]);
    } finally {
      clearTimeout(grace);
    }
  }

  #clearDelayed(key: string): void {
    const entry = this.#delayed.get(key);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.#delayed.delete(key);
  }

  /** Start pending keys, oldest request first, each while its lane has room. */
  #pump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      // A Set iterates what is added while it is walked, so a key requested by a reconcile started here is seen too.
      for (const key of this.#pending) {
        if (this.#closed) break;
        const lane = this.#laneOf(key);
        if (lane !== null && (this.#busy.get(lane) ?? 0) >= this.#opts.concurrency) continue;
        this.#pending.delete(key);
        this.#start(key);
      }
    } finally {
      this.#pumping = false;
    }
    this.#settleIdle();
  }

  #laneOf(key: string): string | null {
    return this.#opts.lane ? this.#opts.lane(key) : "";
  }

  #count(key: string, by: 1 | -1): void {
    const lane = this.#laneOf(key);
    if (lane !== null) this.#busy.set(lane, (this.#busy.get(lane) ?? 0) + by);
  }

  #start(key: string): void {
    const controller = new AbortController();
    // The entry is in #running before the reconcile is called, so a synchronous add(key) from
    // inside it marks the key dirty rather than starting it twice.
    const entry: Running = { controller, done: Promise.resolve() };
    this.#running.set(key, entry);
    this.#count(key, 1);
    entry.done = this.#run(key, controller.signal);
  }

  /** One reconcile of key, with its outcome applied; never rejects (every rejection is caught here). */
  async #run(key: string, signal: AbortSignal): Promise<void> {
    let failed = false;
    try {
      await this.#reconcile(key, signal);
    } catch (err) {
      failed = true;
      // A reconcile aborted by shutdown() is not a failure to report: the queue asked it to stop.
      if (!signal.aborted) this.#failed(key, err);
    }
    if (!failed) this.#failures.delete(key);
    this.#running.delete(key);
    this.#count(key, -1);
    if (!this.#closed) {
      if (this.#dirty.delete(key)) {
        // Asked for again while it ran: that request runs now (after a failure, it is the retry).
        this.#pending.add(key);
      } else if (failed) {
        const n = this.#failures.get(key) ?? 1;
        this.addAfter(key, backoffMs(n, this.#opts.retry, this.#random()));
      }
    }
    this.#pump();
  }

  #failed(key: string, err: unknown): void {
    const n = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, n);
    try {
      this.#opts.onError?.(key, err, n);
    } catch {
      // A throwing observer must not stop the key from being retried; the reconcile's own error was delivered.
    }
  }

  #isIdle(): boolean {
    return this.#pending.size === 0 && this.#running.size === 0;
  }

  #settleIdle(): void {
    if (!this.#isIdle() || this.#idleWaiters.length === 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
