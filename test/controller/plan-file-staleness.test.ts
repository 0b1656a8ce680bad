// staleness(): one line per difference between what a saved plan was computed from and now,
// naming the engine and the field; empty when the plan still holds.
import { describe, expect, it } from "vitest";
import { savedPlan, staleness } from "../../src/controller/plan-file.js";
import {
  base,
  desired,
  desiredEngine,
  EVERY_ACTION,
  hashOf,
  nativeHandle,
  NO_CHANGES,
  observed,
  observedEngine,
  REPLACE_ENGINE_1,
  ROLLOUT,
} from "./plan-file-fixtures.js";

describe("staleness", () => {
  const saved = base();

  it("is empty when nothing moved (times of the observation do not count)", () => {
    expect(staleness(saved, desired(), observed(undefined, "2026-12-01T12:30:00.000Z"), REPLACE_ENGINE_1)).toEqual([]);
  });

  it("names an engine whose desired input hash changed, with both hashes", () => {
    const now = desired([desiredEngine(1, { input_hash: hashOf("c") }), desiredEngine(2)]);
    expect(staleness(saved, now, observed())).toEqual([
      `engine-1: desired input hash changed since the plan (111111111111… → cccccccccccc…)`,
    ]);
  });

  it("names an engine desired now and not in the plan, and one no longer desired", () => {
    expect(staleness(saved, desired([desiredEngine(1), desiredEngine(2), desiredEngine(3)]), observed())).toEqual([
      "engine-3: now desired, not in the plan",
    ]);
    expect(staleness(saved, desired([desiredEngine(1)]), observed())).toEqual([
      "engine-2: no longer desired (the plan has input hash 222222222222…)",
    ]);
  });

  it("names a changed rollout policy by its field", () => {
    const now = desired(undefined, { ...ROLLOUT, max_unavailable: { decode: "50%" } });
    expect(staleness(saved, now, observed())).toEqual([
      'rollout policy changed since the plan (rollout.max_unavailable: {} → {"decode":"50%"})',
    ]);
  });

  it("names a changed kv_transfer policy by its field; a plan saved before KV proofs has none to compare", () => {
    const now = { ...desired(), kv: { ...desired().kv, on_failure: "hold" as const } };
    expect(staleness(saved, now, observed())).toEqual([
      'kv_transfer policy changed since the plan (kv_transfer.on_failure: "restart_decode" → "hold")',
    ]);
    const { kv: _none, ...older } = saved.desired;
    expect(staleness({ ...saved, desired: older }, now, observed())).toEqual([]);
  });

  it("names a running engine that died, and one replaced by another start", () => {
    const died = observed([observedEngine(1, { liveness: "gone" }), observedEngine(2)]);
    expect(staleness(saved, desired(), died)).toEqual([
      `engine-1: running engine changed (launch token token-1-aaaa… → gone)`,
    ]);
    const other = observed([
      observedEngine(1, { handle: nativeHandle("token-x-bbbbbbbbbbbb", 5001) }),
      observedEngine(2),
    ]);
    expect(staleness(saved, desired(), other)).toEqual([
      "engine-1: running engine changed (launch token token-1-aaaa… → token-x-bbbb…)",
      "engine-1: an engine this state directory started runs now, not in the plan (launch token token-x-bbbb…)",
      "engine-1: an engine the plan saw running is gone (launch token token-1-aaaa…)",
    ]);
    const unobservable = observed([observedEngine(1, { liveness: "unknown" }), observedEngine(2)]);
    expect(staleness(saved, desired(), unobservable)).toEqual([
      "engine-1: running engine changed (launch token token-1-aaaa…: alive → unknown)",
    ]);
  });

  it("names phase, applied and running hash, terminal and deferred changes of an engine", () => {
    const now = observed([
      observedEngine(1, {
        phase: "failed",
        terminal: true,
        applied_hash: hashOf("9"),
        running_hash: null,
        handle: null,
        liveness: null,
        deferred: { desiredHash: hashOf("8") },
      }),
      observedEngine(2),
    ]);
    expect(staleness(saved, desired(), now)).toEqual([
      "engine-1: phase changed since the plan (captured → failed)",
      "engine-1: applied input hash changed since the plan (111111111111… → 999999999999…)",
      "engine-1: running input hash changed since the plan (111111111111… → none)",
      "engine-1: running engine changed (launch token token-1-aaaa… → none)",
      "engine-1: now terminally failed (the plan saw it not terminal)",
      `engine-1: deferred desired event changed since the plan (none → {"desiredHash":"${hashOf("8")}"})`,
      "engine-1: an engine the plan saw running is gone (launch token token-1-aaaa…)",
    ]);
  });

  it("names a retiring engine that appeared or died", () => {
    const retiring = {
      handle: nativeHandle("retiring-1-dddddddd", 4100),
      hash: hashOf("0"),
      liveness: "alive" as const,
    };
    const before = base();
    const then = savedPlan({
      desired: desired(),
      observed: observed([observedEngine(1, { retiring }), observedEngine(2)]),
      plan: REPLACE_ENGINE_1,
      desiredDir: "/d",
      stateDir: "/s",
    });
    expect(staleness(before, desired(), observed([observedEngine(1, { retiring }), observedEngine(2)]))).toEqual([
      "engine-1: retiring engine changed (launch token none → retiring-1-d…)",
    ]);
    expect(
      staleness(
        then,
        desired(),
        observed([observedEngine(1, { retiring: { ...retiring, liveness: "gone" } }), observedEngine(2)]),
      ),
    ).toEqual(["engine-1: retiring engine changed (launch token retiring-1-d… → gone)"]);
  });

  it("names engines observed now and not then, and the reverse", () => {
    expect(
      staleness(
        saved,
        desired(),
        observed([
          observedEngine(1),
          observedEngine(2),
          observedEngine(3, { phase: "pending", handle: null, liveness: null }),
        ]),
      ),
    ).toEqual(["engine-3: observed now (phase pending), not when the plan was made"]);
    expect(staleness(saved, desired(), observed([observedEngine(1)]))).toEqual([
      "engine-2: no longer observed (the plan saw phase captured)",
      "engine-2: an engine the plan saw running is gone (launch token token-2-aaaa…)",
    ]);
  });

  it("with the plan computed now: names an engine whose action would differ, though its inputs did not move", () => {
    expect(staleness(saved, desired(), observed(), NO_CHANGES)).toEqual([
      "engine-1: the plan says replace 999999999999…; planned now: nothing",
    ]);
    const reordered = { ...EVERY_ACTION, rollout: [...EVERY_ACTION.rollout].reverse() };
    expect(staleness(base(EVERY_ACTION), desired(), observed(), reordered)).toEqual([
      "the rollout order changed since the plan (now:engine-1 later:engine-2 → later:engine-2 now:engine-1)",
    ]);
    // A reason reworded (it may name a time or a count) is not a different plan.
    const reworded = {
      ...REPLACE_ENGINE_1,
      actions: REPLACE_ENGINE_1.actions.map((a) => ({ ...a, reason: "other words" })),
    };
    expect(staleness(saved, desired(), observed(), reworded)).toEqual([]);
  });

  it("with the plan computed now: names a proof of another pair, or one no longer planned", () => {
    const proveFrom = (prefill: string): typeof NO_CHANGES => ({
      ...NO_CHANGES,
      actions: [{ kind: "prove", engine: "engine-2", prefill, reason: "first transfer proof" }],
      changes: true,
    });
    const was = base(proveFrom("engine-1"));
    expect(staleness(was, desired(), observed(), proveFrom("engine-1"))).toEqual([]);
    expect(staleness(was, desired(), observed(), proveFrom("engine-3"))).toEqual([
      "engine-2: the plan says prove engine-1; planned now: prove engine-3",
    ]);
    expect(staleness(was, desired(), observed(), NO_CHANGES)).toEqual([
      "engine-2: the plan says prove engine-1; planned now: nothing",
    ]);
  });
});
