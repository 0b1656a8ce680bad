// An engine outwaiting a cause re-checks it every resync period for as long as
// it lasts: its recorded history keeps the latest transitions, not all of them.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { initialContext } from "../../machines/engine.js";
import { recordFrom } from "../../src/controller/record.js";
import { HISTORY_LIMIT } from "../../src/state/store.js";
import { openStores } from "../state/open-stores.js";

const stores = openStores();

describe("an engine's recorded history", () => {
  it(`keeps the latest ${HISTORY_LIMIT} transitions through an outwait that lasts`, async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "narwhal-history-"));
    try {
      const store = await stores.open(dir);
      const ctx = initialContext({
        engine: "engine-1",
        desiredHash: "h1",
        retry: { baseMs: 1, capMs: 1, maxAttempts: 1 },
      });
      for (let i = 0; i < 3 * HISTORY_LIMIT; i++) {
        const failed = i % 2 === 1;
        const error = failed
          ? {
              name: "PhaseError",
              message: `re-check ${i}`,
              retryable: true,
              failure: "outwait" as const,
              step: "inspect" as const,
            }
          : null;
        await store.update("engine-1", (prev) =>
          recordFrom(prev, failed ? "failed" : "pending", { ...ctx, error }, "native", null),
        );
      }
      const record = (await stores.open(dir)).engine("engine-1")!;
      expect(record.history).toHaveLength(HISTORY_LIMIT);
      expect(record.history.at(-1)).toMatchObject({
        from: "pending",
        to: "failed",
        note: `inspect: re-check ${3 * HISTORY_LIMIT - 1}`,
      });
    } finally {
      await stores.closeAll();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
