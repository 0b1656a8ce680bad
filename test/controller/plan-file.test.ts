// The saved plan file: written 0600 atomically, read back through its schema (plans the real
// planner computes too), anything that is not a plan refused by name.
import { describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseSavedPlan, readPlanFile, savedPlan, staleness, writePlanFile } from "../../src/controller/plan-file.js";
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
import { DEFAULT_KV } from "../../src/desired/kv-policy.js";
import { base, desired, EVERY_ACTION, hashOf, observed, REPLACE_ENGINE_1 } from "./plan-file-fixtures.js";

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
    expect(back.desired.kv).toEqual(DEFAULT_KV);
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
