// An engine outwaiting a cause re-checks it every resync period for as long as
// it lasts: its recorded history keeps the latest transitions, not all of them.
import { describe, expect, it } from "vitest";
import { initialContext } from "../../machines/engine.js";
import { HISTORY_LIMIT, recordFrom } from "../../src/controller/record.js";
import type { EngineRecord } from "../../src/state/store.js";

describe("an engine's recorded history", () => {
  it(`keeps the latest ${HISTORY_LIMIT} transitions through an outwait that lasts`, () => {
    const ctx = initialContext({ engine: "engine-1", desiredHash: "h1", retry: { baseMs: 1, capMs: 1, maxAttempts: 1 } });
    let record: EngineRecord | undefined;
    for (let i = 0; i < 3 * HISTORY_LIMIT; i++) {
      const failed = i % 2 === 1;
      const error = failed ? { name: "PhaseError", message: `re-check ${i}`, retryable: true, failure: "outwait" as const, step: "inspect" as const } : null;
      record = recordFrom(record, failed ? "failed" : "pending", { ...ctx, error }, "native", null);
    }
    expect(record!.history).toHaveLength(HISTORY_LIMIT);
    expect(record!.history.at(-1)).toMatchObject({ from: "pending", to: "failed", note: `inspect: re-check ${3 * HISTORY_LIMIT - 1}` });
  });
});
