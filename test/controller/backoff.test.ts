// The engine machine's retry delay: capped exponential, jittered to 50–100%
// of the step, pure given the random draw.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { backoffMs, type RetryPolicy } from "../../machines/engine.js";

const policy: RetryPolicy = { baseMs: 1000, capMs: 30_000, maxAttempts: 10 };

describe("backoffMs", () => {
  it("doubles per attempt: random 0 gives half the step, random 1 the whole step", () => {
    expect([1, 2, 3, 4].map((n) => backoffMs(n, policy, 0))).toEqual([500, 1000, 2000, 4000]);
    expect([1, 2, 3, 4].map((n) => backoffMs(n, policy, 1))).toEqual([1000, 2000, 4000, 8000]);
    expect(backoffMs(1, policy, 0.5)).toBe(750);
  });

  it("respects the cap however many attempts failed", () => {
    expect(backoffMs(6, policy, 1)).toBe(30_000);
    expect(backoffMs(50, policy, 1)).toBe(30_000);
    expect(backoffMs(2000, policy, 0)).toBe(15_000);
  });

  it("treats attempt 0 (or less) like the first", () => {
    expect(backoffMs(0, policy, 1)).toBe(1000);
    expect(backoffMs(-3, policy, 0)).toBe(500);
  });

  it("always lies within [step/2, step] and never exceeds the cap", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 200 }), fc.double({ min: 0, max: 1, noNaN: true }), (attempts, r) => {
        const step = Math.min(policy.capMs, policy.baseMs * 2 ** (attempts - 1));
        const ms = backoffMs(attempts, policy, r);
        return ms >= Math.floor(step / 2) && ms <= step && ms <= policy.capMs && Number.isInteger(ms);
      }),
    );
  });
});
