// Rollout gating as tables: max_unavailable per role, P/D units for changes
// that alter the group signature, the last compatible pair kept serving, and
// a failed replacement halting the rest.
import { describe, expect, it } from "vitest";
import { plan } from "../../src/controller/planner.js";
import { maxUnavailable } from "../../src/controller/rollout.js";
import { DEFAULT_ROLLOUT } from "../../src/desired/rollout-policy.js";
import type { Action, ObservedEngine, Plan, RolloutPolicy } from "../../src/controller/plan-types.js";
import {
  captured,
  compatibleEdit,
  desiredFor,
  desiredOf,
  fleetSpecs,
  incompatibleEdit,
  observedOf,
  released,
  RUNNING,
  specOf,
} from "./plan-fixtures.js";

const replaced = (p: Plan) => p.actions.filter((a) => a.kind === "replace").map((a) => a.engine);
const waitOf = (p: Plan, engine: string) =>
  p.actions.find((a): a is Extract<Action, { kind: "wait" }> => a.kind === "wait" && a.engine === engine);
const policy = (over: Partial<RolloutPolicy>): RolloutPolicy => ({ ...DEFAULT_ROLLOUT, ...over });

describe("maxUnavailable", () => {
  it.each([
    [{}, "decode", 4, 1],
    [{ default_max_unavailable: 2 }, "decode", 4, 2],
    [{ max_unavailable: { decode: "25%" } }, "decode", 8, 2],
    [{ max_unavailable: { decode: "25%" } }, "decode", 3, 1],
    [{ max_unavailable: { decode: "100%" } }, "decode", 3, 3],
    [{ max_unavailable: { prefill: 3 } }, "decode", 8, 1],
  ])("%j for %s of %i engines is %i", (over, role, n, expected) => {
    expect(maxUnavailable(policy(over as Partial<RolloutPolicy>), role, n)).toBe(expected);
  });
});

describe("compatible changes roll engine by engine within max_unavailable", () => {
  const specs = fleetSpecs(2, 2);
  const old = specs.map(desiredOf);
  const next = specs.map((s) => desiredOf(compatibleEdit(s)));

  it("releases one engine per role, and says which engine holds the others back", () => {
    const p = plan(desiredFor(next), observedOf(old.map((d) => captured(d))), RUNNING);
    expect(replaced(p)).toEqual(["engine-1", "engine-3"]);
    expect(waitOf(p, "engine-4")).toEqual({
      kind: "wait",
      engine: "engine-4",
      until: "rollout",
      why: "rollout: 1 of 1 decode engines allowed out of service is engine-3, released by this plan",
    });
    expect(p.rollout).toEqual([
      { engines: ["engine-1"], incompatible: false, status: "now" },
      { engines: ["engine-3"], incompatible: false, status: "now" },
      { engines: ["engine-2"], incompatible: false, status: "later" },
      { engines: ["engine-4"], incompatible: false, status: "later" },
    ]);
    expect(p.changes).toBe(true);
    expect(p.serving.engines.map((e) => e.engine)).toEqual(["engine-2", "engine-4"]);
  });

  it("holds the next engine while the released one is being replaced", () => {
    const o = observedOf([
      released(old[0]!, next[0]!),
      captured(old[1]!),
      released(old[2]!, next[2]!, "checked"),
      captured(old[3]!),
    ]);
    const p = plan(desiredFor(next), o, RUNNING);
    expect(replaced(p)).toEqual([]);
    expect(waitOf(p, "engine-4")?.why).toBe(
      "rollout: 1 of 1 decode engines allowed out of service is engine-3, replacing",
    );
    // Waits alone are no change, but a pending rollout step is.
    expect(p.changes).toBe(true);
  });

  it("releases the rest once the first are captured at the new inputs", () => {
    const p = plan(
      desiredFor(next),
      observedOf([captured(next[0]!), captured(old[1]!), captured(next[2]!), captured(old[3]!)]),
      RUNNING,
    );
    expect(replaced(p)).toEqual(["engine-2", "engine-4"]);
  });

  it("counts engines out of service for any reason: a rollout never deepens an outage", () => {
    const o = observedOf([
      captured(old[0]!),
      captured(old[1]!),
      captured(old[2]!),
      captured(old[3]!, { phase: "probed" }),
    ]);
    const p = plan(desiredFor([next[0]!, next[1]!, next[2]!, old[3]!]), o, RUNNING);
    expect(waitOf(p, "engine-3")?.why).toBe(
      "rollout: 1 of 1 decode engines allowed out of service is engine-4, probed",
    );
  });

  it("counts a decode engine being created as out of service: the rollout waits for it to come up", () => {
    const added = desiredOf(specOf(5, "decode"));
    const p = plan(
      desiredFor([old[0]!, old[1]!, next[2]!, old[3]!, added]),
      observedOf(old.map((d) => captured(d))),
      RUNNING,
    );
    expect(p.actions.map((a) => a.kind)).toEqual(["create", "wait"]);
    expect(waitOf(p, "engine-3")?.why).toBe(
      "rollout: 1 of 1 decode engines allowed out of service is engine-5, not started yet",
    );
  });

  it("releases an engine that serves nothing anyway at once (it costs no availability)", () => {
    const o = observedOf([
      captured(old[0]!),
      captured(old[1]!),
      captured(old[2]!),
      captured(old[3]!, { phase: "failed", handle: null, liveness: null }),
    ]);
    const p = plan(desiredFor([old[0]!, old[1]!, next[2]!, next[3]!]), o, RUNNING);
    expect(replaced(p)).toEqual(["engine-4"]);
    expect(waitOf(p, "engine-3")?.until).toBe("rollout");
  });

  it("a percentage allows several at once, but never the last serving pair while released engines can come back", () => {
    const p = plan(
      desiredFor(next, policy({ default_max_unavailable: "100%" })),
      observedOf(old.map((d) => captured(d))),
      RUNNING,
    );
    expect(replaced(p)).toEqual(["engine-1", "engine-3"]);
    expect(waitOf(p, "engine-2")?.why).toBe(
      "rollout: taking engine-2 out now would leave no compatible prefill/decode pair serving; waiting until engine-1, engine-3 are captured",
    );
    expect(waitOf(p, "engine-4")?.why).toBe(
      "rollout: taking engine-4 out now would leave no compatible prefill/decode pair serving; waiting until engine-1, engine-3 are captured",
    );
  });
});

describe("incompatible changes move in P/D units", () => {
  const specs = fleetSpecs(2, 2);
  const old = specs.map(desiredOf);
  const next = specs.map((s) => desiredOf(incompatibleEdit(s)));

  it("2P+2D: P1+D1 first, P2+D2 later, one step each", () => {
    const p = plan(desiredFor(next), observedOf(old.map((d) => captured(d))), RUNNING);
    expect(replaced(p)).toEqual(["engine-1", "engine-3"]);
    expect(p.rollout).toEqual([
      { engines: ["engine-1", "engine-3"], incompatible: true, status: "now" },
      { engines: ["engine-2", "engine-4"], incompatible: true, status: "later" },
    ]);
    expect(p.actions.filter((a) => a.kind === "replace").every((a) => a.kind === "replace" && a.group_changes)).toBe(
      true,
    );
    expect(p.serving.engines.map((e) => e.engine)).toEqual(["engine-2", "engine-4"]);
  });

  it("P2+D2 only once P1+D1 are captured at the new inputs, even when max_unavailable would allow both units", () => {
    const wide = policy({ default_max_unavailable: 2 });
    expect(replaced(plan(desiredFor(next, wide), observedOf(old.map((d) => captured(d))), RUNNING))).toEqual([
      "engine-1",
      "engine-3",
    ]);
    const mid = observedOf([
      released(old[0]!, next[0]!, "probed"),
      captured(old[1]!),
      captured(next[2]!),
      captured(old[3]!),
    ]);
    const p = plan(desiredFor(next, wide), mid, RUNNING);
    expect(replaced(p)).toEqual([]);
    expect(waitOf(p, "engine-2")?.why).toBe(
      "rollout: taking engine-2, engine-4 out now would leave no compatible prefill/decode pair serving; waiting until engine-1 is captured",
    );
    const done = observedOf([captured(next[0]!), captured(old[1]!), captured(next[2]!), captured(old[3]!)]);
    expect(replaced(plan(desiredFor(next, wide), done, RUNNING))).toEqual(["engine-2", "engine-4"]);
  });

  it("a unit is released only when the whole unit fits: a decode out of service holds its prefill too", () => {
    const o = observedOf([
      captured(old[0]!),
      captured(old[1]!),
      captured(old[2]!),
      captured(old[3]!, { phase: "started" }),
    ]);
    const p = plan(desiredFor([next[0]!, old[1]!, next[2]!, old[3]!]), o, RUNNING);
    expect(replaced(p)).toEqual([]);
    expect(waitOf(p, "engine-1")?.why).toBe(
      "rollout: 1 of 1 decode engines allowed out of service is engine-4, started",
    );
  });

  it("1P+1D: the unit moves although no pair can keep serving (capacity does not allow one)", () => {
    const small = fleetSpecs(1, 1);
    const p = plan(
      desiredFor(small.map((s) => desiredOf(incompatibleEdit(s)))),
      observedOf(small.map((s) => captured(desiredOf(s)))),
      RUNNING,
    );
    expect(replaced(p)).toEqual(["engine-1", "engine-2"]);
  });

  it("3P+2D: the extra prefill is a unit of its own, after the pairs", () => {
    const big = fleetSpecs(3, 2);
    const p = plan(
      desiredFor(big.map((s) => desiredOf(incompatibleEdit(s)))),
      observedOf(big.map((s) => captured(desiredOf(s)))),
      RUNNING,
    );
    expect(p.rollout.map((s) => s.engines)).toEqual([["engine-1", "engine-4"], ["engine-2", "engine-5"], ["engine-3"]]);
  });

  it('"recreate" releases every incompatible change at once, max_unavailable ignored', () => {
    const p = plan(
      desiredFor(next, policy({ incompatible: "recreate" })),
      observedOf(old.map((d) => captured(d))),
      RUNNING,
    );
    expect(replaced(p)).toEqual(["engine-1", "engine-2", "engine-3", "engine-4"]);
    expect(p.rollout).toEqual([
      { engines: ["engine-1", "engine-2", "engine-3", "engine-4"], incompatible: true, status: "now" },
    ]);
    expect(p.serving.engines).toEqual([]);
  });
});

describe("a failed replacement halts the rollout", () => {
  const specs = fleetSpecs(2, 2);
  const old = specs.map(desiredOf);
  const next = specs.map((s) => desiredOf(incompatibleEdit(s)));
  const failedAtNew = (over: Partial<ObservedEngine> = {}) => ({
    ...released(old[0]!, next[0]!),
    phase: "failed",
    retiring: null,
    terminal: true,
    ...over,
  });

  it("no further engine of it is released, the old engines keep serving, and plan says why", () => {
    const p = plan(
      desiredFor(next),
      observedOf([failedAtNew(), captured(old[1]!), captured(next[2]!), captured(old[3]!)]),
      RUNNING,
    );
    expect(replaced(p)).toEqual([]);
    expect(p.halted).toEqual([
      {
        engine: "engine-1",
        why: `engine-1 failed at its desired inputs ${next[0]!.input_hash.slice(0, 8)} (terminal, no attempts left)`,
      },
    ]);
    expect(waitOf(p, "engine-2")).toMatchObject({
      until: "halted",
      why: expect.stringMatching(/^rollout halted: engine-1 failed at its desired inputs/),
    });
    expect(p.rollout).toEqual([{ engines: ["engine-2", "engine-4"], incompatible: true, status: "halted" }]);
    expect(p.serving.engines.map((e) => e.engine)).toEqual(["engine-2", "engine-4"]);
    expect(p.changes).toBe(true);
  });

  it("a replacement failing with retries left halts too", () => {
    const p = plan(
      desiredFor(next),
      observedOf([failedAtNew({ terminal: false }), captured(old[1]!), captured(next[2]!), captured(old[3]!)]),
      RUNNING,
    );
    expect(p.halted[0]?.why).toMatch(/retrying with backoff/);
  });

  it("stays halted while the recorded halted engine retries, and lifts once it is captured at the new inputs", () => {
    const retrying = observedOf([
      failedAtNew({ phase: "started", halted: "engine-1 failed at its desired inputs" }),
      captured(old[1]!),
      captured(next[2]!),
      captured(old[3]!),
    ]);
    expect(plan(desiredFor(next), retrying, RUNNING).halted).toEqual([
      { engine: "engine-1", why: "engine-1 failed at its desired inputs" },
    ]);
    const recovered = observedOf([
      captured(next[0]!, { halted: "engine-1 failed at its desired inputs" }),
      captured(old[1]!),
      captured(next[2]!),
      captured(old[3]!),
    ]);
    const p = plan(desiredFor(next), recovered, RUNNING);
    expect(p.halted).toEqual([]);
    expect(replaced(p)).toEqual(["engine-2", "engine-4"]);
  });

  it("fixing the bad input in desired/ lifts the halt: the failed engine gets the fix at once", () => {
    const fixed = specs.map((s) => desiredOf(incompatibleEdit(s, "r3")));
    const p = plan(
      desiredFor(fixed),
      observedOf([failedAtNew(), captured(old[1]!), captured(next[2]!), captured(old[3]!)]),
      RUNNING,
    );
    expect(p.halted).toEqual([]);
    expect(replaced(p)).toContain("engine-1");
  });

  it("any engine failing at its desired inputs halts further releases, not only a replaced one", () => {
    const o = observedOf([
      captured(old[0]!),
      captured(old[1]!),
      captured(old[2]!),
      captured(old[3]!, { phase: "failed", handle: null, liveness: null }),
    ]);
    const p = plan(desiredFor([next[0]!, next[1]!, next[2]!, old[3]!]), o, RUNNING);
    expect(p.halted).toEqual([
      { engine: "engine-4", why: expect.stringMatching(/^engine-4 failed at its desired inputs/) },
    ]);
    expect(replaced(p)).toEqual([]);
  });

  it("nothing is halted when no change is pending (a failed engine alone is the machine's to retry)", () => {
    const p = plan(
      desiredFor(next),
      observedOf([failedAtNew(), captured(next[1]!), captured(next[2]!), captured(next[3]!)]),
      RUNNING,
    );
    expect(p.halted).toEqual([]);
    expect(p.rollout).toEqual([]);
  });
});

describe("warnings", () => {
  it("warns when the desired fleet predicts no prefill and decode sharing a group signature", () => {
    const specs = fleetSpecs(1, 1);
    const ds = [desiredOf(incompatibleEdit(specs[0]!)), desiredOf(specs[1]!)];
    const p = plan(desiredFor(ds), observedOf(specs.map((s) => captured(desiredOf(s)))), RUNNING);
    expect(p.warnings).toContainEqual(
      "after this change no captured prefill and decode share their pairing inputs (NIXL compatibility inputs, model, block size): prefill engine-1 and decode engine-2 differ in model.revision; a router could pair none of them",
    );
  });

  it("warns when a unit is released although no compatible pair can keep serving (1P+1D)", () => {
    const specs = fleetSpecs(1, 1);
    const p = plan(
      desiredFor(specs.map((s) => desiredOf(incompatibleEdit(s)))),
      observedOf(specs.map((s) => captured(desiredOf(s)))),
      RUNNING,
    );
    expect(p.warnings).toEqual([
      expect.stringMatching(
        /^rollout: replacing engine-1, engine-2 leaves no compatible prefill\/decode pair serving until they are captured: the fleet has too few engines/,
      ),
    ]);
  });

  it("is silent when a pair is predicted and kept", () => {
    const specs = fleetSpecs(2, 2);
    expect(
      plan(
        desiredFor(specs.map((s) => desiredOf(incompatibleEdit(s)))),
        observedOf(specs.map((s) => captured(desiredOf(s)))),
        RUNNING,
      ).warnings,
    ).toEqual([]);
  });
});
