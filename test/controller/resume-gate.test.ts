// The gate a step's actor awaits before it begins (src/controller/resume-gate.ts), on a real engine
// actor (the machine's scripted world): a suspended engine's next step waits for resume.
import { describe, expect, it } from "vitest";
import { settled, spawnEngine, world } from "../machines/engine-world.js";
import { untilResumed } from "../../src/controller/resume-gate.js";

/** Whether `p` has settled after every pending callback ran (setImmediate follows the microtasks). */
async function state(p: Promise<void>): Promise<"pending" | "resolved" | "rejected"> {
  let s: "pending" | "resolved" | "rejected" = "pending";
  void p.then(
    () => (s = "resolved"),
    () => (s = "rejected"),
  );
  await new Promise((r) => setImmediate(r));
  return s;
}

describe("untilResumed", () => {
  it("resolves at once for an engine that is not suspended, and for one with no actor", async () => {
    const a = spawnEngine(world());
    await settled(a);
    expect(await state(untilResumed(a, new AbortController().signal))).toBe("resolved");
    expect(await state(untilResumed(undefined, new AbortController().signal))).toBe("resolved");
  });

  it("holds while the engine is suspended, through other events, and lets go when it is resumed", async () => {
    const a = spawnEngine(world());
    await settled(a);
    a.send({ type: "SUSPENSION", suspended: true });
    const gate = untilResumed(a, new AbortController().signal);
    expect(await state(gate)).toBe("pending");
    // Another event changes the snapshot; the engine is still suspended.
    a.send({ type: "RETIRING_LOST" });
    expect(await state(gate)).toBe("pending");
    a.send({ type: "SUSPENSION", suspended: false });
    expect(await state(gate)).toBe("resolved");
  });

  it("rejects when the step is abandoned (its signal aborts), already or while it waits", async () => {
    const a = spawnEngine(world());
    await settled(a);
    a.send({ type: "SUSPENSION", suspended: true });
    const step = new AbortController();
    const gate = untilResumed(a, step.signal);
    step.abort(new Error("the state was exited"));
    expect(await state(gate)).toBe("rejected");
    await expect(gate).rejects.toThrow("the state was exited");
    expect(await state(untilResumed(a, step.signal))).toBe("rejected");
  });
});
