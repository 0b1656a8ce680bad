// Conditions in `status`: positive polarity (True means what the name says), a
// reason with every status, and a transition time that moves only on a change.
import { describe, expect, it } from "vitest";
import { initialContext, type EngineContext } from "../../machines/engine-context.js";
import { conditionsFor, stoppedConditions } from "../../src/controller/record.js";
import type { Condition } from "../../src/state/store.js";

const H1 = "1".repeat(64);
const H2 = "2".repeat(64);
const T0 = "2026-01-01T00:00:00.000Z";
const T1 = "2026-01-01T00:05:00.000Z";

function ctx(over: Partial<EngineContext> = {}): EngineContext {
  return {
    ...initialContext({ engine: "engine-1", desiredHash: H1, retry: { baseMs: 1000, capMs: 60_000, maxAttempts: 5 } }),
    ...over,
  };
}

const brief = (cs: Condition[]) => Object.fromEntries(cs.map((c) => [c.type, `${c.status}/${c.reason}`]));
const error = {
  name: "PhaseError",
  message: "tokenizer failed",
  retryable: false,
  engine: "engine-1",
  step: "check" as const,
};

describe("conditions", () => {
  it.each<[string, string, Partial<EngineContext>, Record<string, string>]>([
    [
      "a new engine",
      "pending",
      {},
      { Ready: "False/Pending", UpToDate: "False/NotRunning", Failed: "False/NoFailure" },
    ],
    [
      "a captured engine",
      "captured",
      { runningHash: H1 },
      { Ready: "True/Captured", UpToDate: "True/HashMatches", Failed: "False/NoFailure" },
    ],
    [
      "a terminal failure",
      "failed",
      { error, terminal: true, attempts: 1 },
      { Ready: "False/Failed", UpToDate: "False/NotRunning", Failed: "True/Terminal" },
    ],
    [
      "a failure awaiting its retry",
      "failed",
      { error: { ...error, retryable: true }, attempts: 2, retryAt: Date.parse(T1) },
      { Ready: "False/Failed", UpToDate: "False/NotRunning", Failed: "True/Retrying" },
    ],
    [
      "a cause outside narwhal's control, outwaited",
      "failed",
      {
        error: { ...error, retryable: true, failure: "outwait" as const },
        attempts: 0,
        retryAt: Date.parse(T1),
        waitingSince: Date.parse(T0),
      },
      { Ready: "False/Failed", UpToDate: "False/NotRunning", Failed: "True/Waiting" },
    ],
    [
      "a retry in progress",
      "inspected",
      { error: { ...error, retryable: true }, attempts: 2 },
      { Ready: "False/Inspected", UpToDate: "False/NotRunning", Failed: "False/Recovering" },
    ],
    [
      "an engine serving old inputs",
      "captured",
      { runningHash: H2 },
      { Ready: "True/Captured", UpToDate: "False/HashDiffers", Failed: "False/NoFailure" },
    ],
    [
      "a replacement keeping the old engine",
      "prepared",
      {
        retiring: {
          handle: { kind: "native", pid: 1, pgid: 1, boot_id: "b", start_ticks: 1, launch_token: "t" },
          run: null,
          hash: H2,
        },
      },
      { Ready: "False/Prepared", UpToDate: "False/HashDiffers", Failed: "False/NoFailure" },
    ],
  ])("%s", (_name, phase, over, expected) => {
    expect(brief(conditionsFor(undefined, phase, ctx(over), T0))).toEqual(expected);
  });

  it("names the failing step and the message, and when the next attempt is", () => {
    const [, , failed] = conditionsFor(
      undefined,
      "failed",
      ctx({ error: { ...error, retryable: true }, attempts: 2, retryAt: Date.parse(T1) }),
      T0,
    );
    expect(failed!.message).toBe(`check: tokenizer failed (attempt 2 of 5, next at ${T1})`);
  });

  it("says an outwaited cause uses no attempt, and since when it is awaited", () => {
    const [, , failed] = conditionsFor(
      undefined,
      "failed",
      ctx({
        error: { ...error, retryable: true, failure: "outwait" },
        retryAt: Date.parse(T1),
        waitingSince: Date.parse(T0),
      }),
      T0,
    );
    expect(failed!.message).toBe(
      `check: tokenizer failed (outside narwhal's control; re-checked next at ${T1}, using no attempt, waiting since ${T0})`,
    );
  });

  it("keeps lastTransitionTime while a status holds and moves it when the status changes", () => {
    const first = conditionsFor(undefined, "pending", ctx(), T0);
    const still = conditionsFor(first, "inspected", ctx(), T1);
    expect(still.map((c) => c.lastTransitionTime)).toEqual([T0, T0, T0]);
    // Reason changes (Pending → Inspected) but status does not: no transition.
    expect(still[0]!.reason).toBe("Inspected");
    const captured = conditionsFor(still, "captured", ctx({ runningHash: H1 }), T1);
    expect(captured.map((c) => `${c.type}:${c.lastTransitionTime}`)).toEqual([
      `Ready:${T1}`,
      `UpToDate:${T1}`,
      `Failed:${T0}`,
    ]);
  });

  it("after down: not ready, not running, not failed", () => {
    const before = conditionsFor(undefined, "captured", ctx({ runningHash: H1 }), T0);
    const after = stoppedConditions(before, T1);
    expect(brief(after)).toEqual({ Ready: "False/Stopped", UpToDate: "False/NotRunning", Failed: "False/NoFailure" });
    expect(after.find((c) => c.type === "Failed")!.lastTransitionTime).toBe(T0);
  });
});
