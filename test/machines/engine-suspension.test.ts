// A suspended engine (`narwhal suspend`) in a retryable-failure backoff: the machine's own backoff
// timer must not move it (observed, never changed), and resume continues the backoff from the
// deadline kept in context, or at once if it has passed. The timer's firing is seen through the
// actor's inspection events, so no test sleeps past a deadline to find out.
import { describe, expect, it } from "vitest";
import { waitFor, type InspectionEvent } from "xstate";
import { settled, spawnEngine, steps, world } from "./engine-world.js";

/** Resolves at the next firing of the failed state's backoff timer. */
function backoffFired() {
  let fired: () => void = () => undefined;
  const once = new Promise<void>((resolve) => (fired = resolve));
  const inspect = (e: InspectionEvent) => {
    if (e.type === "@xstate.event" && e.event.type.startsWith("xstate.after.backoff")) fired();
  };
  return { once, inspect };
}

describe("engine machine while suspended", () => {
  it("a suspended failed engine passes its backoff deadline and stays failed; resume retries it at once", async () => {
    const w = world({ inspect: [{ retryable: true }] });
    const timer = backoffFired();
    const a = spawnEngine(w, undefined, undefined, timer.inspect);
    // Suspended while its inspection runs: the step is not abandoned, its failure is recorded.
    a.send({ type: "SUSPENSION", suspended: true });
    await timer.once;
    const held = a.getSnapshot();
    expect(held.value).toBe("failed");
    expect(held.context).toMatchObject({ suspended: true, attempts: 1, terminal: false, retryFrom: "pending" });
    // The deadline is wall-clock; node fires a timer by the event loop's clock, cached when the loop last woke
    // (it lagged Date.now() by 1 ms in one run): the firing may precede the deadline by that lag, no more.
    expect(Date.now()).toBeGreaterThanOrEqual(held.context.retryAt! - 50);
    expect(steps(w)).toEqual(["inspect"]);

    a.send({ type: "SUSPENSION", suspended: false });
    const s = await settled(a);
    expect(s.value).toBe("captured");
    expect(s.context.suspended).toBe(false);
    expect(steps(w)).toEqual(["inspect", "inspect", "prepare", "check", "start", "probe", "capture"]);
  });

  it("resumed before its deadline, the retry runs at the kept deadline, not earlier and not from a new backoff", async () => {
    const w = world({ check: [{ retryable: true }] });
    const a = spawnEngine(w, undefined, { baseMs: 400, capMs: 400, maxAttempts: 3 });
    await waitFor(a, (s) => s.value === "failed", { timeout: 5000 });
    a.send({ type: "SUSPENSION", suspended: true });
    const deadline = a.getSnapshot().context.retryAt!;
    a.send({ type: "SUSPENSION", suspended: false });
    expect(a.getSnapshot()).toMatchObject({ value: "failed", context: { retryAt: deadline, attempts: 1 } });
    expect((await settled(a)).value).toBe("captured");
    const retried = w.calls.filter((c) => c.step === "check")[1]!;
    expect(retried.at).toBeGreaterThanOrEqual(deadline - 50); // the timer's clock lag, as above; at once would be 400 ms early
    expect(retried.at! - deadline).toBeLessThan(400);
  });

  it("a suspension that arrives during the backoff holds it too, and one lifted after a passed deadline retries at once", async () => {
    const w = world({ probe: [{ retryable: true }] });
    const timer = backoffFired();
    const a = spawnEngine(w, undefined, { baseMs: 100, capMs: 100, maxAttempts: 3 }, timer.inspect);
    await waitFor(a, (s) => s.value === "failed", { timeout: 5000 });
    a.send({ type: "SUSPENSION", suspended: true });
    await timer.once;
    expect(a.getSnapshot().value).toBe("failed");
    expect(steps(w)).toEqual(["inspect", "prepare", "check", "start", "probe"]);
    const resumedAt = Date.now();
    a.send({ type: "SUSPENSION", suspended: false });
    expect((await settled(a)).value).toBe("captured");
    const retried = w.calls.filter((c) => c.step === "probe")[1]!;
    expect(retried.at! - resumedAt).toBeLessThan(100);
  });
});
