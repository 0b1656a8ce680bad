// How many engines' heavy host work runs on one node at once (NARWHAL_NODE_CONCURRENCY): inspection
// (nvidia-smi, the model tree's hashes, the bind tests), the runtime check, and the start (a model
// load from disk into GPU memory). The work queue bounds the fleet (NARWHAL_CONCURRENCY); this bounds
// a node, so sixteen engines of one host do not hash one checkpoint sixteen times at once.
//
// Slots are held only around work that waits on nothing but its own host: never while a step waits
// for another engine (engines sharing a GPU gather in SharedStarts first, then their whole launch
// takes one slot), so a bound below a sharing group cannot deadlock. Stops take none: they free a node.
// First come, first served per node; a step cancelled while queued leaves the queue at once.
import type { ProgressSink } from "../phases/progress.js";
import { append } from "./map-lists.js";

/** What a step queued for one of a node's slots waits for, in the operator's words. */
export const slotWait = (node: string, limit: number): string =>
  `a free slot on node ${node} (all ${limit} of NARWHAL_NODE_CONCURRENCY taken by other engines' inspections, checks and starts)`;

interface Waiter {
  grant(): void;
}

export class NodeSlots {
  private readonly busy = new Map<string, number>();
  private readonly queued = new Map<string, Waiter[]>();

  /** `limit`: slots per node (0: unbounded). */
  constructor(private readonly limit: number) {}

  /**
   * Run `work` holding one of `node`'s slots. `waits` (the step's) is told once, when the node's slots are
   * all taken and this waits. Rejects with the signal's reason if it is cancelled while queued.
   */
  async run<T>(node: string, signal: AbortSignal, work: () => Promise<T>, waits?: ProgressSink): Promise<T> {
    await this.acquire(node, signal, waits);
    try {
      return await work();
    } finally {
      this.release(node);
    }
  }

  /** Slots of `node` taken now (for tests and the live view). */
  inUse(node: string): number {
    return this.busy.get(node) ?? 0;
  }

  private acquire(node: string, signal: AbortSignal, waits?: ProgressSink): Promise<void> {
    signal.throwIfAborted();
    const busy = this.busy.get(node) ?? 0;
    if (this.limit === 0 || busy < this.limit) {
      this.busy.set(node, busy + 1);
      return Promise.resolve();
    }
    waits?.({ awaiting: slotWait(node, this.limit), limitMs: null });
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        grant: () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const list = this.queued.get(node) ?? [];
        this.queued.set(
          node,
          list.filter((w) => w !== waiter),
        );
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      append(this.queued, node, waiter);
    });
  }

  private release(node: string): void {
    const next = this.queued.get(node)?.shift();
    // The slot passes straight to the next in line: the count stays as it is.
    if (next) return next.grant();
    const busy = (this.busy.get(node) ?? 1) - 1;
    if (busy === 0) this.busy.delete(node);
    else this.busy.set(node, busy);
  }
}
