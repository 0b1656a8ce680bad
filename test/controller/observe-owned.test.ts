// What runs, as a light observation (no process-table scan) sees it: the last scan's list less what no
// record or actor claims any more. A replaced engine's old process was claimed at the scan (its actor
// was retiring it) and is stopped by the replacement; planning a sweep of it afterwards only logged
// "stopping orphaned engine" for a process already gone, once per transition of the new one.
import { describe, expect, it } from "vitest";
import { initialContext } from "../../machines/engine-context.js";
import type { EngineBackend } from "../../src/backends/types.js";
import { World } from "../../src/controller/world.js";
import { observe, type KnownEngine } from "../../src/controller/observe.js";
import type { Liveness } from "../../src/controller/plan-types.js";
import { handleOf, owned } from "./plan-fixtures.js";
import { memoryLogger } from "../log/memory-logger.js";

const quiet = memoryLogger().log;
const alive = { kind: "native", isAlive: async () => true, listOwned: async () => [] } as unknown as EngineBackend;
const retry = { baseMs: 1000, capMs: 60_000, maxAttempts: 5 };

/** engine-1 running its new process (launch token `new`), nothing retiring any more. */
const replacedEngine: KnownEngine = {
  engine: "engine-1",
  phase: "started",
  context: { ...initialContext({ engine: "engine-1", desiredHash: "h", retry }), handle: handleOf("engine-1", "new") },
  record: undefined,
  has_actor: true,
};

const lightOptions = {
  probe: false,
  key: false,
  health: false,
  owned: null,
  cache: new Map<string, Liveness>(),
  faults: new Map(),
  secrets: [],
  serving: null,
};

describe("a light observation's list of what runs", () => {
  it("keeps the last scan's claimed entries and drops those no record or actor claims any more", async () => {
    const world = new World({ native: alive, container: alive }, quiet, 1000);
    // At the last scan engine-1's old process (token old) ran, retiring; its new one (token new) had just started.
    const lastScan = [owned("engine-1", "old"), owned("engine-1", "new")];
    const o = await observe(world, [replacedEngine], lastScan, lightOptions);
    expect(o.claimed).toEqual(["new"]);
    expect(o.owned.map((x) => x.launch_token)).toEqual(["new"]);
  });
});
