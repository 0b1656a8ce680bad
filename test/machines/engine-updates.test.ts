// The engine machine's named context updates (machines/engine-updates.ts), on
// contexts built by initialContext: the loss budget across a stable run, which
// deferred event is replayed, and retiring then restoring a captured engine.
import { describe, expect, it } from "vitest";
import {
  initialContext,
  lossUpdate,
  replayOf,
  restoreRetiring,
  restoresRetiring,
  retireForChange,
  STABLE_RUN_MS,
  type EngineContext,
} from "../../machines/engine.js";
import type {
  CacheLayout,
  CheckResult,
  EngineHandle,
  Inspection,
  PreparedRun,
  ProbeResult,
} from "../../src/phases/types.js";

const retry = { baseMs: 100, capMs: 1_000, maxAttempts: 3 };
const fresh = (over: Partial<EngineContext> = {}): EngineContext => ({
  ...initialContext({ engine: "engine-0", desiredHash: "h1", retry }),
  ...over,
});

describe("lossUpdate", () => {
  it("uses an attempt after a short run and gives up at the budget", () => {
    const now = 1_000_000;
    const first = lossUpdate(fresh({ attempts: 1, capturedAt: now - 1_000 }), "exited 1", now, 0);
    expect(first).toMatchObject({
      attempts: 2,
      terminal: false,
      retryFrom: "pending",
      handle: null,
      runningHash: null,
    });
    expect(first.error).toMatchObject({
      name: "EngineLost",
      engine: "engine-0",
      step: "observe",
      message: "the engine is no longer running: exited 1",
    });
    // jitter 0: half of the second step (2 × base)
    expect(first.retryAt).toBe(now + 100);
    const last = lossUpdate(fresh({ attempts: 2, capturedAt: now - 1_000 }), "exited 1", now, 0);
    expect(last).toMatchObject({ attempts: 3, terminal: true, retryAt: null });
  });

  it("starts the budget over after a stable run", () => {
    const now = 10 * STABLE_RUN_MS;
    expect(lossUpdate(fresh({ attempts: 2, capturedAt: now - STABLE_RUN_MS - 1 }), "oom", now, 0)).toMatchObject({
      attempts: 1,
      terminal: false,
    });
    expect(lossUpdate(fresh({ attempts: 2, capturedAt: now - STABLE_RUN_MS }), "oom", now, 0)).toMatchObject({
      attempts: 3,
      terminal: true,
    });
  });
});

describe("replayOf", () => {
  it("replays a removal before a desired change, and no change to the current hash", () => {
    expect(replayOf(fresh({ deferred: { remove: true, desiredHash: "h2" } }))).toEqual({ type: "REMOVE" });
    expect(replayOf(fresh({ deferred: { desiredHash: "h2" } }))).toEqual({
      type: "DESIRED_CHANGED",
      desiredHash: "h2",
    });
    expect(replayOf(fresh({ deferred: { desiredHash: "h1" } }))).toBeNull();
    expect(replayOf(fresh())).toBeNull();
  });
});

describe("retireForChange and restoreRetiring", () => {
  const captured = fresh({
    inspection: { engine: "engine-0" } as Inspection,
    run: { runId: "r1" } as unknown as PreparedRun,
    checked: {} as CheckResult,
    handle: { kind: "native", pid: 42 } as unknown as EngineHandle,
    runningHash: "h1",
    probe: {} as ProbeResult,
    layout: {} as CacheLayout,
    attempts: 2,
  });

  it("keeps a captured engine as restorable and brings it back when the desired state reverts", () => {
    const retired = { ...captured, ...retireForChange(captured, "h2") };
    expect(retired).toMatchObject({
      desiredHash: "h2",
      handle: null,
      attempts: 0,
      retiring: { handle: captured.handle, run: captured.run, hash: "h1" },
    });
    expect(retired.retiring?.restorable).toEqual({
      inspection: captured.inspection,
      checked: captured.checked,
      probe: captured.probe,
      layout: captured.layout,
    });
    expect(restoresRetiring(retired, "h3")).toBe(false);
    expect(restoresRetiring(retired, "h1")).toBe(true);
    expect({ ...retired, ...restoreRetiring(retired) }).toMatchObject({
      desiredHash: "h1",
      runningHash: "h1",
      handle: captured.handle,
      run: captured.run,
      layout: captured.layout,
      retiring: null,
      attempts: 0,
    });
  });

  it("keeps an uncaptured engine without evidence, and an earlier retiring engine when none runs", () => {
    const uncaptured = { ...captured, layout: null };
    expect(retireForChange(uncaptured, "h2").retiring).toMatchObject({ hash: "h1", restorable: null });
    expect(restoresRetiring({ ...uncaptured, ...retireForChange(uncaptured, "h2") }, "h1")).toBe(false);
    const replacing = { ...captured, ...retireForChange(captured, "h2") };
    expect(retireForChange(replacing, "h3").retiring).toBe(replacing.retiring);
  });
});
