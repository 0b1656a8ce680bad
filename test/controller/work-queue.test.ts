// The keyed work queue (src/controller/work-queue.ts): deduplicated, single-flight,
// bounded, per-key backoff, clean shutdown. Reconciles are real promises the test
// settles by hand; time is vitest's fake clock, so delays are exact and nothing sleeps.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import fc from "fast-check";
import { WorkQueue, type WorkQueueOptions } from "../../src/controller/work-queue.js";
import { NarwhalError } from "../../src/errors.js";

interface Run {
  key: string;
  signal: AbortSignal;
  /** Order of this start among every request and start of the test (see `clock`). */
  at: number;
  settled: boolean;
  ok(): void;
  fail(err?: unknown): void;
}

/** A queue whose reconciles wait for the test to settle them, with every start recorded and checked. */
function harness(opts: Partial<WorkQueueOptions> = {}) {
  const runs: Run[] = [];
  const errors: Array<{ key: string; err: unknown; failures: number }> = [];
  const violations: string[] = [];
  const live = new Set<string>();
  const state = { clock: 0 };
  const concurrency = opts.concurrency ?? 1;
  const laneOf = opts.lane ?? (() => "");
  const queue = new WorkQueue(
    (key, signal) =>
      new Promise<void>((resolve, reject) => {
        if (live.has(key)) violations.push(`${key} started while already running`);
        live.add(key);
        const lane = laneOf(key);
        const inLane = [...live].filter((k) => laneOf(k) === lane).length;
        if (lane !== null && inLane > concurrency)
          violations.push(`${inLane} running in lane "${lane}" with concurrency ${concurrency}`);
        const run: Run = {
          key,
          signal,
          at: ++state.clock,
          settled: false,
          ok: () => settle(() => resolve()),
          fail: (err = new Error(`${key} failed`)) => settle(() => reject(err)),
        };
        const settle = (how: () => void) => {
          if (run.settled) return;
          run.settled = true;
          live.delete(key);
          how();
        };
        runs.push(run);
      }),
    {
      concurrency,
      retry: { baseMs: 100, capMs: 1000 },
      onError: (key, err, failures) => errors.push({ key, err, failures }),
      random: () => 1,
      ...opts,
    },
  );
  const open = (key?: string) => runs.filter((r) => !r.settled && (key === undefined || r.key === key));
  const startsOf = (key: string) => runs.filter((r) => r.key === key).length;
  return { queue, runs, errors, violations, open, startsOf, state };
}

/**
 * Let the queue act on a settled reconcile: its bookkeeping runs a few promise turns after the
 * reconcile's promise settles. Only microtasks are drained; no time passes.
 */
async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("WorkQueue: deduplication, single flight, concurrency", () => {
  it("runs a requested key at once and is idle after it settles", async () => {
    const h = harness();
    h.queue.add("a");
    expect(h.open("a")).toHaveLength(1);
    expect([h.queue.running, h.queue.depth]).toEqual([1, 0]);
    h.open("a")[0]!.ok();
    await h.queue.idle();
    expect([h.queue.running, h.queue.depth, h.queue.delayed]).toEqual([0, 0, 0]);
    expect(h.startsOf("a")).toBe(1);
  });

  it("keeps a key pending once however often it is requested", async () => {
    const h = harness();
    h.queue.add("a");
    for (let i = 0; i < 5; i++) h.queue.add("b");
    expect(h.queue.depth).toBe(1);
    h.open("a")[0]!.ok();
    await flush();
    h.open("b")[0]!.ok();
    await h.queue.idle();
    expect(h.startsOf("b")).toBe(1);
  });

  it("never runs a key twice at once: requests while it runs make exactly one more run after", async () => {
    const h = harness({ concurrency: 4 });
    h.queue.add("a");
    for (let i = 0; i < 3; i++) h.queue.add("a");
    expect([h.queue.running, h.queue.depth]).toEqual([1, 0]);
    h.open("a")[0]!.ok();
    await flush();
    expect(h.startsOf("a")).toBe(2);
    h.open("a")[0]!.ok();
    await h.queue.idle();
    expect(h.startsOf("a")).toBe(2);
    expect(h.violations).toEqual([]);
  });

  it.each([
    { concurrency: 1, keys: 3, running: 1, depth: 2 },
    { concurrency: 2, keys: 3, running: 2, depth: 1 },
    { concurrency: 3, keys: 3, running: 3, depth: 0 },
    { concurrency: 5, keys: 3, running: 3, depth: 0 },
  ])("runs at most $concurrency keys at once ($keys requested)", ({ concurrency, keys, running, depth }) => {
    const h = harness({ concurrency });
    for (let i = 0; i < keys; i++) h.queue.add(`k${i}`);
    expect([h.queue.running, h.queue.depth]).toEqual([running, depth]);
  });

  it("gives each lane its own slots, and a key of no lane never waits for one", async () => {
    const lane = (key: string) => (key === "fleet" ? null : key.startsWith("kv:") ? "kv" : "");
    const h = harness({ concurrency: 2, lane });
    for (const k of ["kv:a", "kv:b", "kv:c", "a", "b", "c"]) h.queue.add(k);
    // Both lanes full: kv:c and c wait, each behind its own lane's work only.
    expect(h.open().map((r) => r.key)).toEqual(["kv:a", "kv:b", "a", "b"]);
    h.queue.add("fleet");
    expect(h.open("fleet")).toHaveLength(1);
    expect([h.queue.running, h.queue.depth]).toEqual([5, 2]);
    h.open("a")[0]!.ok();
    await flush();
    // The freed engine slot goes to the engine lane's oldest waiter, not to the proof waiting longer.
    expect(h.open("c")).toHaveLength(1);
    expect(h.open("kv:c")).toHaveLength(0);
    h.open("kv:a")[0]!.ok();
    await flush();
    expect(h.open("kv:c")).toHaveLength(1);
    for (const r of h.open()) r.ok();
    await h.queue.idle();
    expect(h.violations).toEqual([]);
  });

  it("starts waiting keys oldest request first", async () => {
    const h = harness();
    for (const k of ["a", "c", "b", "c"]) h.queue.add(k);
    for (let i = 0; i < 3; i++) {
      h.open()[0]!.ok();
      await flush();
    }
    expect(h.runs.map((r) => r.key)).toEqual(["a", "c", "b"]);
  });

  it("marks a key dirty, not started twice, when its reconcile requests it synchronously", async () => {
    const starts: string[] = [];
    const queue: WorkQueue = new WorkQueue(
      async (key) => {
        starts.push(key);
        if (starts.length === 1) queue.add(key);
      },
      { concurrency: 2, retry: { baseMs: 100, capMs: 1000 } },
    );
    queue.add("a");
    await queue.idle();
    expect(starts).toEqual(["a", "a"]);
  });
});

describe("WorkQueue: addAfter", () => {
  it("runs a key no earlier than asked", async () => {
    const h = harness();
    h.queue.addAfter("a", 200);
    expect([h.queue.delayed, h.queue.depth, h.queue.running]).toEqual([1, 0, 0]);
    vi.advanceTimersByTime(199);
    expect(h.startsOf("a")).toBe(0);
    vi.advanceTimersByTime(1);
    expect(h.startsOf("a")).toBe(1);
    expect(h.queue.delayed).toBe(0);
  });

  it.each([
    { first: 100, second: 50, runsAt: 50 },
    { first: 50, second: 100, runsAt: 50 },
    { first: 80, second: 80, runsAt: 80 },
  ])("keeps the earliest of two schedules ($first ms then $second ms: runs at $runsAt, once)", async (t) => {
    const h = harness();
    h.queue.addAfter("a", t.first);
    h.queue.addAfter("a", t.second);
    expect(h.queue.delayed).toBe(1);
    vi.advanceTimersByTime(t.runsAt - 1);
    expect(h.startsOf("a")).toBe(0);
    vi.advanceTimersByTime(1);
    h.open("a")[0]!.ok();
    await flush();
    vi.advanceTimersByTime(1000);
    expect(h.startsOf("a")).toBe(1);
  });

  it("add() runs a scheduled key now and drops the schedule", async () => {
    const h = harness();
    h.queue.addAfter("a", 500);
    h.queue.add("a");
    expect([h.queue.delayed, h.queue.running]).toEqual([0, 1]);
    h.open("a")[0]!.ok();
    await flush();
    vi.advanceTimersByTime(1000);
    expect(h.startsOf("a")).toBe(1);
  });

  it("waits for a delay longer than a Node timer can hold instead of firing at once", () => {
    const h = harness();
    h.queue.addAfter("a", 2 ** 40);
    vi.advanceTimersByTime(1000);
    expect([h.startsOf("a"), h.queue.delayed]).toEqual([0, 1]);
  });

  it("is a no-op for a key already pending, and treats ms <= 0 as add()", () => {
    const h = harness();
    h.queue.add("busy");
    h.queue.add("a");
    h.queue.addAfter("a", 100);
    expect([h.queue.depth, h.queue.delayed]).toEqual([1, 0]);
    h.queue.addAfter("b", 0);
    expect([h.queue.depth, h.queue.delayed]).toEqual([2, 0]);
  });

  it("schedules a running key for a run after the current one, when asked after it started", async () => {
    const h = harness();
    h.queue.add("a");
    h.queue.addAfter("a", 100);
    expect([h.queue.running, h.queue.delayed]).toEqual([1, 1]);
    h.open("a")[0]!.ok();
    await flush();
    expect(h.startsOf("a")).toBe(1);
    vi.advanceTimersByTime(100);
    expect(h.startsOf("a")).toBe(2);
  });
});

describe("WorkQueue: failures and backoff", () => {
  // baseMs 100, capMs 1000: the step doubles per consecutive failure, jittered to 50–100%.
  it.each([
    { random: 1, delays: [100, 200, 400, 800, 1000, 1000] },
    { random: 0, delays: [50, 100, 200, 400, 500, 500] },
    { random: 0.5, delays: [75, 150, 300, 600, 750, 750] },
  ])("re-queues a failed key after a capped, jittered backoff (random $random)", async ({ random, delays }) => {
    const h = harness({ random: () => random });
    h.queue.add("a");
    for (const [i, delay] of delays.entries()) {
      h.open("a")[0]!.fail();
      await flush();
      expect(h.errors.at(-1)?.failures).toBe(i + 1);
      expect([h.queue.delayed, h.queue.running]).toEqual([1, 0]);
      vi.advanceTimersByTime(delay - 1);
      expect(h.startsOf("a")).toBe(i + 1);
      vi.advanceTimersByTime(1);
      expect(h.startsOf("a")).toBe(i + 2);
    }
  });

  it("resets the backoff after a success", async () => {
    const h = harness();
    h.queue.add("a");
    for (const delay of [100, 200]) {
      h.open("a")[0]!.fail();
      await flush();
      vi.advanceTimersByTime(delay);
    }
    h.open("a")[0]!.ok();
    await flush();
    h.queue.add("a");
    h.open("a")[0]!.fail();
    await flush();
    expect(h.errors.map((e) => e.failures)).toEqual([1, 2, 1]);
    vi.advanceTimersByTime(99);
    expect(h.open("a")).toHaveLength(0);
    vi.advanceTimersByTime(1);
    expect(h.open("a")).toHaveLength(1);
  });

  it("reports each failure with its error before re-queueing, and keeps other keys' counts apart", async () => {
    const h = harness({ concurrency: 2 });
    h.queue.add("a");
    h.queue.add("b");
    const boom = new Error("boom");
    h.open("a")[0]!.fail(boom);
    await flush();
    expect(h.errors).toEqual([{ key: "a", err: boom, failures: 1 }]);
    h.open("b")[0]!.ok();
    await flush();
    expect(h.errors).toHaveLength(1);
  });

  it("catches a reconcile that throws synchronously and retries it", async () => {
    const seen: unknown[] = [];
    let calls = 0;
    const queue = new WorkQueue(
      (() => {
        calls++;
        if (calls === 1) throw new Error("sync");
        return Promise.resolve();
      }) as () => Promise<void>,
      { concurrency: 1, retry: { baseMs: 100, capMs: 100 }, random: () => 1, onError: (_k, err) => seen.push(err) },
    );
    queue.add("a");
    await flush();
    expect(seen.map((e) => (e as Error).message)).toEqual(["sync"]);
    expect(queue.delayed).toBe(1);
    vi.advanceTimersByTime(100);
    await queue.idle();
    expect(calls).toBe(2);
  });

  it("runs a request that arrived during a failing run at once, not after the backoff", async () => {
    const h = harness();
    h.queue.add("a");
    h.queue.add("a");
    h.open("a")[0]!.fail();
    await flush();
    expect([h.queue.running, h.queue.delayed]).toEqual([1, 0]);
    expect(h.startsOf("a")).toBe(2);
  });

  it("still retries when onError throws", async () => {
    const h = harness({
      onError: () => {
        throw new Error("observer broke");
      },
    });
    h.queue.add("a");
    h.open("a")[0]!.fail();
    await flush();
    expect(h.queue.delayed).toBe(1);
  });
});

describe("WorkQueue: idle", () => {
  it("resolves at once when nothing is pending or running, and ignores delayed keys", async () => {
    const h = harness();
    await h.queue.idle();
    h.queue.addAfter("a", 1000);
    await h.queue.idle();
    expect(h.queue.delayed).toBe(1);
  });

  it("waits for pending and running keys", async () => {
    const h = harness();
    h.queue.add("a");
    h.queue.add("b");
    let done = false;
    const idle = h.queue.idle().then(() => (done = true));
    h.open("a")[0]!.ok();
    await flush();
    expect(done).toBe(false);
    h.open("b")[0]!.ok();
    await idle;
    expect(done).toBe(true);
  });
});

describe("WorkQueue: shutdown", () => {
  it("drops pending and delayed keys, clears every timer, aborts running reconciles and waits for them", async () => {
    const h = harness();
    h.queue.add("a");
    h.queue.add("b");
    h.queue.addAfter("c", 5000);
    let finished = false;
    const stopped = h.queue.shutdown(10_000).then(() => (finished = true));
    expect(h.queue.closed).toBe(true);
    expect([h.queue.depth, h.queue.delayed]).toEqual([0, 0]);
    expect(h.open("a")[0]!.signal.aborted).toBe(true);
    await flush();
    expect(finished).toBe(false);
    h.open("a")[0]!.fail(new Error("aborted"));
    await stopped;
    expect(vi.getTimerCount()).toBe(0);
    expect(h.errors).toEqual([]);
    expect(h.runs.map((r) => r.key)).toEqual(["a"]);
  });

  it("resolves after graceMs when a reconcile ignores its signal, and clears its grace timer otherwise", async () => {
    const h = harness();
    h.queue.add("stuck");
    let finished = false;
    const stopped = h.queue.shutdown(300).then(() => (finished = true));
    vi.advanceTimersByTime(299);
    await flush();
    expect(finished).toBe(false);
    vi.advanceTimersByTime(1);
    await stopped;
    expect(vi.getTimerCount()).toBe(0);
  });

  it("takes no more work after shutdown, and resolves at once with nothing running", async () => {
    const h = harness();
    await h.queue.shutdown(1000);
    h.queue.add("a");
    h.queue.addAfter("b", 10);
    expect([h.queue.depth, h.queue.delayed, h.queue.running]).toEqual([0, 0, 0]);
    expect(vi.getTimerCount()).toBe(0);
    expect(h.runs).toHaveLength(0);
  });

  it("neither re-queues nor reports a reconcile that rejects after shutdown aborted it", async () => {
    const h = harness();
    h.queue.add("a");
    const run = h.open("a")[0]!;
    const stopped = h.queue.shutdown(1000);
    run.fail(new Error("aborted by shutdown"));
    await stopped;
    expect([h.queue.delayed, h.errors.length]).toEqual([0, 0]);
  });
});

describe("WorkQueue: options", () => {
  it.each([
    { concurrency: 0, retry: { baseMs: 100, capMs: 1000 }, input: "WorkQueueOptions.concurrency" },
    { concurrency: 1.5, retry: { baseMs: 100, capMs: 1000 }, input: "WorkQueueOptions.concurrency" },
    { concurrency: 1, retry: { baseMs: 0, capMs: 1000 }, input: "WorkQueueOptions.retry" },
    { concurrency: 1, retry: { baseMs: 100, capMs: 10 }, input: "WorkQueueOptions.retry" },
  ])("rejects concurrency $concurrency / retry $retry.baseMs..$retry.capMs naming $input", (opts) => {
    const make = () => new WorkQueue(async () => {}, opts);
    expect(make).toThrow(NarwhalError);
    expect(make).toThrow(expect.objectContaining({ input: opts.input, retryable: false }));
  });
});

type Op =
  | { t: "add"; key: string }
  | { t: "addAfter"; key: string; ms: number }
  | { t: "settle"; pick: number; ok: boolean }
  | { t: "tick"; ms: number };

const keyArb = fc.constantFrom("a", "b", "c", "d");
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constant("add" as const), key: keyArb }),
  fc.record({ t: fc.constant("addAfter" as const), key: keyArb, ms: fc.integer({ min: 0, max: 400 }) }),
  fc.record({ t: fc.constant("settle" as const), pick: fc.nat(), ok: fc.boolean() }),
  fc.record({ t: fc.constant("tick" as const), ms: fc.integer({ min: 1, max: 600 }) }),
);

describe("WorkQueue: property over random interleavings", () => {
  it("single flight, bounded concurrency, depth within distinct keys, and every request eventually served", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 }), fc.array(opArb, { maxLength: 40 }), async (concurrency, ops) => {
        const h = harness({ concurrency, random: () => 0.5 });
        const lastRequest = new Map<string, number>();
        const check = () => {
          expect(h.violations).toEqual([]);
          expect(h.queue.running).toBeLessThanOrEqual(concurrency);
          expect(h.queue.depth).toBeLessThanOrEqual(lastRequest.size);
        };
        for (const op of ops) {
          if (op.t === "add" || op.t === "addAfter") {
            lastRequest.set(op.key, ++h.state.clock);
            if (op.t === "add") h.queue.add(op.key);
            else h.queue.addAfter(op.key, op.ms);
          } else if (op.t === "settle") {
            const open = h.open();
            const run = open[op.pick % Math.max(1, open.length)];
            if (op.ok) run?.ok();
            else run?.fail();
          } else {
            vi.advanceTimersByTime(op.ms);
          }
          await flush();
          check();
        }
        // Drain: every reconcile succeeds from now on; time passes until nothing is left.
        for (let round = 0; round < 100 && h.queue.running + h.queue.depth + h.queue.delayed > 0; round++) {
          for (const run of h.open()) run.ok();
          await flush();
          vi.advanceTimersByTime(1000);
          check();
        }
        expect([h.queue.running, h.queue.depth, h.queue.delayed]).toEqual([0, 0, 0]);
        for (const [key, requested] of lastRequest) {
          const lastStart = Math.max(0, ...h.runs.filter((r) => r.key === key).map((r) => r.at));
          expect(lastStart, `${key} last requested at ${requested}`).toBeGreaterThan(requested);
        }
        await h.queue.shutdown(0);
      }),
      { numRuns: 200 },
    );
  });
});
