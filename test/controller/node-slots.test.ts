// The per-node bound on heavy host work (NARWHAL_NODE_CONCURRENCY), on real promises: never more than
// the limit at once on a node, other nodes untouched, first come first served, a cancelled waiter gone
// from the queue at once (its slot goes to the next), 0 unbounded.
import { describe, expect, it } from "vitest";
import { NodeSlots, slotWait } from "../../src/controller/node-slots.js";

/** A piece of work that runs until `finish()`; `started` says whether it began. */
function gate() {
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  const g = { started: false, finish, work: async () => ((g.started = true), await done) };
  return g;
}

const tick = () => new Promise((r) => setImmediate(r));

describe("NodeSlots", () => {
  it("runs at most `limit` at once per node, in arrival order, and leaves other nodes alone", async () => {
    const slots = new NodeSlots(2);
    const signal = new AbortController().signal;
    const queued: number[] = [];
    const gates = [gate(), gate(), gate(), gate()];
    const runs = gates.map((g, i) => slots.run("node-a", signal, g.work, () => queued.push(i)));
    const other = gate();
    const otherRun = slots.run("node-b", signal, other.work);
    await tick();
    expect(gates.map((g) => g.started)).toEqual([true, true, false, false]);
    expect(queued).toEqual([2, 3]);
    expect(slots.inUse("node-a")).toBe(2);
    expect(other.started).toBe(true);
    gates[1]!.finish();
    await tick();
    expect(gates.map((g) => g.started)).toEqual([true, true, true, false]);
    expect(slots.inUse("node-a")).toBe(2);
    for (const g of gates) g.finish();
    other.finish();
    await Promise.all([...runs, otherRun]);
    expect(gates.every((g) => g.started)).toBe(true);
    expect(slots.inUse("node-a")).toBe(0);
  });

  it("releases the slot when the work fails", async () => {
    const slots = new NodeSlots(1);
    const signal = new AbortController().signal;
    await expect(slots.run("n", signal, () => Promise.reject(new Error("inspect failed")))).rejects.toThrow(
      "inspect failed",
    );
    const g = gate();
    const run = slots.run("n", signal, g.work);
    await tick();
    expect(g.started).toBe(true);
    g.finish();
    await run;
  });

  it("drops a waiter cancelled in the queue at once, with its signal's reason, and the next one gets the slot", async () => {
    const slots = new NodeSlots(1);
    const first = gate();
    const firstRun = slots.run("n", new AbortController().signal, first.work);
    const cancelled = new AbortController();
    const never = gate();
    const cancelledRun = slots.run("n", cancelled.signal, never.work);
    const last = gate();
    const lastRun = slots.run("n", new AbortController().signal, last.work);
    const reason = new Error("the engine's step was cancelled");
    cancelled.abort(reason);
    await expect(cancelledRun).rejects.toBe(reason);
    first.finish();
    await firstRun;
    await tick();
    expect(never.started).toBe(false);
    expect(last.started).toBe(true);
    last.finish();
    await lastRun;
    expect(slots.inUse("n")).toBe(0);
  });

  it("does not bound anything at 0", async () => {
    const slots = new NodeSlots(0);
    const gates = Array.from({ length: 20 }, gate);
    const runs = gates.map((g) => slots.run("n", new AbortController().signal, g.work));
    await tick();
    expect(gates.every((g) => g.started)).toBe(true);
    for (const g of gates) g.finish();
    await Promise.all(runs);
  });

  it("says what a queued step waits for, naming the node and the setting", () => {
    expect(slotWait("gpu-7", 4)).toBe(
      "a free slot on node gpu-7 (all 4 of NARWHAL_NODE_CONCURRENCY taken by other engines' inspections, checks and starts)",
    );
  });
});
