// A full observation takes a native engine's liveness from the process-table scan it has just made (the
// listing), as it takes a container's from the one labelled list: the backend is asked only for a handle
// the scan did not find as it was recorded (issue 14: over ssh each such question is two commands on the
// engine's node, its boot id and its /proc stat).
import { describe, expect, it } from "vitest";
import { initialContext } from "../../machines/engine-context.js";
import type { EngineBackend, OwnedEngine } from "../../src/backends/types.js";
import { World } from "../../src/controller/world.js";
import { observe, type KnownEngine } from "../../src/controller/observe.js";
import type { Liveness } from "../../src/controller/plan-types.js";
import type { EngineHandle } from "../../src/phases/types.js";
import { handleOf } from "./plan-fixtures.js";
import { memoryLogger } from "../log/memory-logger.js";

const retry = { baseMs: 1000, capMs: 60_000, maxAttempts: 5 };

/** A native backend that says every process it is asked about is gone, and keeps what it was asked. */
function askedBackend(): { backend: EngineBackend; asked: EngineHandle[] } {
  const asked: EngineHandle[] = [];
  const backend = {
    kind: "native",
    isAlive: async (h: EngineHandle) => (asked.push(h), false),
    listOwned: async () => [],
  } as unknown as EngineBackend;
  return { backend, asked };
}

const known = (engine: string, handle: EngineHandle): KnownEngine => ({
  engine,
  phase: "started",
  context: { ...initialContext({ engine, desiredHash: "h", retry }), handle },
  record: undefined,
  has_actor: true,
});

const listing = (engine: string, handle: EngineHandle): OwnedEngine => ({
  engine,
  launch_token: handle.launch_token,
  running: true,
  handle,
});

describe("liveness from the observation's own scan", () => {
  it("answers a native engine the scan found as recorded, and asks the backend about any other", async () => {
    const { backend, asked } = askedBackend();
    const world = new World({ native: backend, container: backend }, memoryLogger().log, 1000);
    const [h1, h2, h3] = ["engine-1", "engine-2", "engine-3"].map((e) => handleOf(e));
    const scanned = [
      listing("engine-1", h1!),
      // engine-2's pid now runs another process (a later start tick): not engine-2's.
      listing("engine-2", { ...h2!, start_ticks: 7 } as EngineHandle),
      // engine-3's process, found carrying another launch token: not this handle's.
      listing("engine-3", { ...h3!, launch_token: "another" } as EngineHandle),
    ];
    const o = await observe(world, [known("engine-1", h1!), known("engine-2", h2!), known("engine-3", h3!)], [], {
      probe: true,
      key: false,
      health: false,
      owned: scanned.map((owned) => ({ backend, owned })),
      cache: new Map<string, Liveness>(),
      faults: new Map(),
      secrets: [],
      serving: null,
    });
    expect(Object.fromEntries(Object.values(o.engines).map((e) => [e.engine, e.liveness]))).toEqual({
      "engine-1": "alive",
      "engine-2": "gone",
      "engine-3": "gone",
    });
    expect(asked).toEqual([h2, h3]);
  });

  it("takes from the listing only the handles known when it was taken: one recorded meanwhile is asked of the backend", async () => {
    const { backend, asked } = askedBackend();
    const world = new World({ native: backend, container: backend }, memoryLogger().log, 1000);
    const [h1, h2] = ["engine-1", "engine-2"].map((e) => handleOf(e));
    // The listing shows engine-2 not running (as a start's just-created container is); its handle came after.
    const scanned = [listing("engine-1", h1!), { ...listing("engine-2", h2!), running: false }];
    const o = await observe(world, [known("engine-1", h1!), known("engine-2", h2!)], [], {
      probe: true,
      key: false,
      health: false,
      owned: scanned.map((owned) => ({ backend, owned })),
      listedFor: new Set([h1!.launch_token]),
      cache: new Map<string, Liveness>(),
      faults: new Map(),
      secrets: [],
      serving: null,
    });
    expect(asked).toEqual([h2]); // not "gone" from the listing: the backend's answer now
    expect(o.engines["engine-1"]!.liveness).toBe("alive");
  });
});
