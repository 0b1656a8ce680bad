// The saved plan: its file (written 0600 atomically, read back through its schema, anything else
// refused by name) and staleness, one line per difference naming the engine and the field.
import { describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import {
  parseSavedPlan,
  readPlanFile,
  savedPlan,
  staleness,
  writePlanFile,
  type SavedPlan,
} from "../../src/controller/plan-file.js";
import { NarwhalError } from "../../src/errors.js";
import { plan as planFleet } from "../../src/controller/planner.js";
import {
  argsEdit,
  captured,
  desiredFor,
  desiredOf,
  fleetSpecs,
  incompatibleEdit,
  observedOf,
  owned,
  specOf,
  STARTUP,
} from "./plan-fixtures.js";
import {
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

const base = (plan = REPLACE_ENGINE_1): SavedPlan =>
  savedPlan({
    desired: desired(),
    observed: observed(),
    plan,
    desiredDir: "/fleet/desired",
    stateDir: "/fleet/state",
    at: new Date("2026-12-01T12:00:00Z"),
  });

const tmp = () => fs.mkdtemp(path.join(os.tmpdir(), "narwhal-plan-file-"));

describe("the saved plan file", () => {
  it("round-trips through its schema: every action kind, with its fields, and the fingerprint", async () => {
    const dir = await tmp();
    const file = path.join(dir, "p.json");
    const saved = base(EVERY_ACTION);
    await writePlanFile(file, saved);
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    const back = await readPlanFile(file);
    expect(back).toEqual(saved);
    expect(back.apiVersion).toBe("narwhal/v1");
    expect(back.kind).toBe("Plan");
    expect(back.desired.engines).toEqual({ "engine-1": hashOf("1"), "engine-2": hashOf("2") });
    expect(back.observed.engines["engine-1"]).toEqual({
      phase: "captured",
      applied_hash: hashOf("1"),
      running_hash: hashOf("1"),
      launch_token: `token-1-${"a".repeat(20)}`,
      liveness: "alive",
      retiring: null,
      terminal: false,
      deferred: null,
    });
    // Only what the next writer renamed into place: no temp file stays beside it.
    expect(await fs.readdir(dir)).toEqual(["p.json"]);
  });

  it("keeps no times of the observation: the same world observed later is the same projection", () => {
    const later = savedPlan({
      desired: desired(),
      observed: observed(undefined, "2026-12-01T13:00:00.000Z"),
      plan: REPLACE_ENGINE_1,
      desiredDir: "/d",
      stateDir: "/s",
    });
    expect(later.observed).toEqual(base().observed);
    expect(JSON.stringify(later.observed)).not.toContain("2026-12-01T13");
  });

  it("refuses a file that is not a plan, naming the file and what is wrong", async () => {
    const dir = await tmp();
    const cases: Array<[string, string | null, RegExp]> = [
      ["garbage.json", "{not json", /not JSON/],
      ["state.json", JSON.stringify({ version: 1, engines: {} }), /\$\.apiVersion/],
      [
        "future.json",
        JSON.stringify({ ...base(), apiVersion: "narwhal/v2" }),
        /apiVersion "narwhal\/v2" is not narwhal\/v1/,
      ],
      [
        "cut.json",
        JSON.stringify({
          ...base(),
          plan: { ...REPLACE_ENGINE_1, actions: [{ kind: "explode", engine: "engine-1" }] },
        }),
        /\$\.plan\.actions\.0/,
      ],
      ["missing.json", null, /does not exist/],
    ];
    for (const [name, text, why] of cases) {
      const file = path.join(dir, name);
      if (text !== null) await fs.writeFile(file, text);
      const err = await readPlanFile(file).catch((e: unknown) => e);
      expect(err, name).toBeInstanceOf(NarwhalError);
      expect((err as NarwhalError).message, name).toContain(file);
      expect((err as NarwhalError).message, name).toMatch(why);
      expect((err as NarwhalError).input, name).toBe(file);
      expect((err as NarwhalError).fix, name).toMatch(/narwhal plan/);
    }
    const asDir = await readPlanFile(dir).catch((e: unknown) => e as NarwhalError);
    expect((asDir as NarwhalError).message).toBe(`${dir} is not a narwhal plan: it is a directory`);
  });

  it("parses the text it writes and nothing it does not: an extra top-level field is refused", () => {
    expect(() => parseSavedPlan(JSON.stringify({ ...base(), surprise: 1 }), "x.json")).toThrow(
      /x\.json is not a narwhal plan/,
    );
  });
});

describe("plans the planner computes", () => {
  // A converged 2P+2D fleet, then edits that make the planner use every part of a plan.
  const specs = fleetSpecs(2, 2);
  const ds = specs.map(desiredOf);
  const edited = [
    ds[0]!,
    desiredOf(argsEdit(specs[1]!, "a")),
    desiredOf(incompatibleEdit(specs[2]!)),
    desiredOf(specOf(7, "decode")),
    desiredOf(specOf(8, "decode")),
  ];
  const world = observedOf(
    [captured(ds[0]!), captured(ds[1]!), captured(ds[2]!), captured(ds[3]!, { liveness: "gone" })],
    {
      owned: [owned("engine-8", "tok-8"), owned("engine-9", "tok-9")],
    },
  );
  const computed = planFleet(desiredFor(edited), world, STARTUP);
  const saved = savedPlan({
    desired: desiredFor(edited),
    observed: world,
    plan: computed,
    desiredDir: "/d",
    stateDir: "/s",
  });

  it("round-trip through the file unchanged: every kind of action, a replacement with its fields", async () => {
    expect(computed.actions.map((a) => `${a.kind} ${a.engine}`)).toEqual([
      "adopt engine-8",
      "remove engine-4",
      "create engine-7",
      "sweep-orphan engine-9",
      "wait engine-2",
      "wait engine-3",
    ]);
    const argsOnly = specs.map((s, i) => (i === 1 ? desiredOf(argsEdit(s, "a")) : desiredOf(s)));
    const converged = observedOf(ds.map((d) => captured(d)));
    const replace = planFleet(desiredFor(argsOnly), converged, STARTUP);
    expect(replace.actions).toEqual([
      expect.objectContaining({
        kind: "replace",
        engine: "engine-2",
        fields: [expect.objectContaining({ path: expect.stringMatching(/^launch\.runtime\.extra_args\[\d+\]$/) })],
      }),
    ]);
    const dir = await tmp();
    for (const [name, one] of [
      ["every.json", saved],
      [
        "replace.json",
        savedPlan({
          desired: desiredFor(argsOnly),
          observed: converged,
          plan: replace,
          desiredDir: "/d",
          stateDir: "/s",
        }),
      ],
    ] as const) {
      const file = path.join(dir, name);
      await writePlanFile(file, one);
      // JSON drops an `old: undefined` (a field added by the edit): compare as JSON, as apply reads it.
      expect(await readPlanFile(file), name).toEqual(JSON.parse(JSON.stringify(one)));
    }
  });

  it("are still valid when nothing moved, and stale once an engine is edited again", () => {
    expect(staleness(saved, desiredFor(edited), world, planFleet(desiredFor(edited), world, STARTUP))).toEqual([]);
    const again = edited.map((d) => (d.engine === "engine-2" ? desiredOf(argsEdit(specs[1]!, "b")) : d));
    expect(staleness(saved, desiredFor(again), world, planFleet(desiredFor(again), world, STARTUP))).toEqual([
      expect.stringMatching(/^engine-2: desired input hash changed since the plan \([0-9a-f]{12}… → [0-9a-f]{12}…\)$/),
    ]);
  });

  it("are stale when the same world would now be planned for a running controller (not a startup)", () => {
    const running = planFleet(desiredFor(edited), world, { ...STARTUP, startup: false });
    expect(staleness(saved, desiredFor(edited), world, running)).toContainEqual(
      expect.stringMatching(/^engine-8: the plan says adopt tok-8…; planned now: /),
    );
  });
});

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
});
