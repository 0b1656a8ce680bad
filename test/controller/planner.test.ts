// The pure planner as tables: every action kind and its reason, from a
// converged fleet changed in exactly the way each case reads.
import { describe, expect, it } from "vitest";
import { plan } from "../../src/controller/planner.js";
import type { Action, Observed } from "../../src/controller/plan-types.js";
import {
  argsEdit,
  captured,
  compatibleEdit,
  desiredFor,
  desiredOf,
  fleetSpecs,
  handleOf,
  observedOf,
  owned,
  released,
  RUNNING,
  specOf,
  STARTUP,
} from "./plan-fixtures.js";

const kinds = (actions: Action[]) => actions.map((a) => `${a.kind} ${a.engine}`);

describe("plan: a converged fleet", () => {
  it("has nothing to do: no action, no rollout, no change, and serves every engine", () => {
    const ds = fleetSpecs(1, 1).map(desiredOf);
    const p = plan(desiredFor(ds), observedOf(ds.map((d) => captured(d))), RUNNING);
    expect(p.actions).toEqual([]);
    expect(p.rollout).toEqual([]);
    expect(p.changes).toBe(false);
    expect(p.serving.engines.map((e) => e.engine)).toEqual(["engine-1", "engine-2"]);
  });
});

describe("plan: per-engine actions and reasons", () => {
  const [s1, s2] = fleetSpecs(1, 1) as [ReturnType<typeof specOf>, ReturnType<typeof specOf>];
  const d1 = desiredOf(s1);
  const d2 = desiredOf(s2);

  it("creates a desired engine nothing knows", () => {
    const p = plan(desiredFor([d1, d2]), observedOf([captured(d1)]), RUNNING);
    expect(p.actions).toEqual([
      { kind: "create", engine: "engine-2", role: "decode", reason: "in desired/, not started yet" },
    ]);
    expect(p.changes).toBe(true);
  });

  it("creates again an engine whose actor reached removed", () => {
    const p = plan(
      desiredFor([d1, d2]),
      observedOf([captured(d1), captured(d2, { phase: "removed", handle: null, liveness: null })]),
      RUNNING,
    );
    expect(p.actions).toEqual([
      { kind: "create", engine: "engine-2", role: "decode", reason: "removed earlier and desired again" },
    ]);
  });

  it("adopts an owned running engine of that name at startup only, and creates otherwise", () => {
    const o = observedOf([captured(d1)], { owned: [owned("engine-2", "tok-x", { input_hash: d2.input_hash })] });
    const atStart = plan(desiredFor([d1, d2]), o, STARTUP);
    expect(atStart.actions).toEqual([
      expect.objectContaining({ kind: "adopt", engine: "engine-2", launch_token: "tok-x" }),
    ]);
    expect((atStart.actions[0] as { reason: string }).reason).toMatch(/no record of it.*the desired inputs/);
    // Not adopted later: the same owned engine is then an orphan (nothing claims it) and engine-2 is created.
    const later = plan(desiredFor([d1, d2]), o, RUNNING);
    expect(kinds(later.actions)).toEqual(["create engine-2", "sweep-orphan engine-2"]);
  });

  it("adopts the owned engine started from the desired inputs when several stand for one name, and sweeps the other", () => {
    const o = observedOf([captured(d1)], {
      owned: [
        owned("engine-2", "tok-a", { input_hash: "0".repeat(64) }),
        owned("engine-2", "tok-b", { input_hash: d2.input_hash }),
      ],
    });
    const p = plan(desiredFor([d1, d2]), o, STARTUP);
    expect(p.actions.map((a) => [a.kind, "launch_token" in a ? a.launch_token : null])).toEqual([
      ["adopt", "tok-b"],
      ["sweep-orphan", "tok-a"],
    ]);
  });

  it("does not adopt an owned engine whose run directory is unusable: creates, and sweeps it", () => {
    const o = observedOf([captured(d1)], { owned: [owned("engine-2", "tok-x", { adoptable: false, run_dir: null })] });
    expect(kinds(plan(desiredFor([d1, d2]), o, STARTUP).actions)).toEqual(["create engine-2", "sweep-orphan engine-2"]);
  });

  it("sweeps every owned engine no record claims, and only those", () => {
    const o = observedOf([captured(d1), captured(d2)], {
      owned: [owned("engine-1", "tok-engine-1"), owned("engine-9", "tok-9")],
    });
    const p = plan(desiredFor([d1, d2]), o, RUNNING);
    expect(p.actions).toEqual([
      {
        kind: "sweep-orphan",
        engine: "engine-9",
        launch_token: "tok-9",
        handle: handleOf("engine-9", "tok-9"),
        reason: expect.stringMatching(/launch token tok-9.*no record or actor stands for it/),
      },
    ]);
  });

  it("restarts an engine whose recorded handle is gone, and takes it out of the serving fleet", () => {
    const p = plan(
      desiredFor([d1, d2]),
      observedOf([captured(d1), captured(d2, { liveness: "gone", problem: "exited; last log lines: CUDA OOM" })]),
      RUNNING,
    );
    expect(p.actions).toEqual([
      { kind: "restart-lost", engine: "engine-2", reason: "exited; last log lines: CUDA OOM" },
    ]);
    // A prefill with no decode of its group is not listed: a router could pair it with nothing.
    expect(p.serving).toEqual({ group_signature: null, pairing_class: null, engines: [], pairs: [] });
  });

  it("restarts an engine with a problem (key not enforced) although it is alive", () => {
    const p = plan(
      desiredFor([d1, d2]),
      observedOf([captured(d1), captured(d2, { problem: "the engine answers without its API key" })]),
      RUNNING,
    );
    expect(p.actions).toEqual([
      { kind: "restart-lost", engine: "engine-2", reason: "the engine answers without its API key" },
    ]);
  });

  it("gives a gone engine a default reason when no cause was observed", () => {
    const p = plan(desiredFor([d1]), observedOf([captured(d1, { liveness: "gone" })]), RUNNING);
    expect(p.actions).toEqual([
      { kind: "restart-lost", engine: "engine-1", reason: "its recorded engine is no longer running" },
    ]);
  });

  it("waits for observation when liveness is unknown: never acts on a guess (not even a pending change)", () => {
    const e1 = desiredOf(compatibleEdit(s1));
    const p = plan(desiredFor([e1, d2]), observedOf([captured(d1, { liveness: "unknown" }), captured(d2)]), RUNNING);
    expect(p.actions).toEqual([
      { kind: "wait", engine: "engine-1", why: expect.stringMatching(/cannot observe.*guess/), until: "observation" },
    ]);
    // The change is still pending (`narwhal plan` exits 2): a later rollout step.
    expect(p.rollout).toEqual([{ engines: ["engine-1"], incompatible: false, status: "later" }]);
    expect(p.changes).toBe(true);
  });

  it("forgets a retiring engine found gone; the replacement goes on", () => {
    const e1 = desiredOf(compatibleEdit(s1));
    const o = released(d1, e1, "inspected");
    o.retiring!.liveness = "gone";
    const p = plan(desiredFor([e1, d2]), observedOf([o, captured(d2)]), RUNNING);
    expect(p.actions).toEqual([
      {
        kind: "forget-retiring",
        engine: "engine-1",
        reason: expect.stringMatching(
          /^the old engine \(inputs \w+\), kept serving during the replacement, is gone; the replacement goes on without it$/,
        ),
      },
    ]);
  });

  it("does not report a retiring engine gone while its own stop step (replacing) ends it", () => {
    const e1 = desiredOf(compatibleEdit(s1));
    const o = released(d1, e1, "replacing");
    o.retiring!.liveness = "gone";
    const p = plan(desiredFor([e1, d2]), observedOf([o, captured(d2)]), RUNNING);
    expect(p.actions.filter((a) => a.kind === "forget-retiring")).toEqual([]);
  });

  it("retries a terminally failed engine at startup only (a fresh attempt budget), not when a record only is seen later", () => {
    const failed = captured(d2, {
      phase: "failed",
      terminal: true,
      handle: null,
      liveness: null,
      running_hash: null,
      has_actor: false,
    });
    const o = observedOf([captured(d1), failed]);
    expect(plan(desiredFor([d1, d2]), o, STARTUP).actions).toEqual([
      { kind: "retry", engine: "engine-2", reason: expect.stringMatching(/fresh attempt budget/) },
    ]);
    expect(plan(desiredFor([d1, d2]), o, RUNNING).actions).toEqual([]);
    expect(
      plan(desiredFor([d1, d2]), observedOf([captured(d1), { ...failed, has_actor: true }]), STARTUP).actions,
    ).toEqual([]);
    expect(
      plan(desiredFor([d1, d2]), observedOf([captured(d1), { ...failed, terminal: false }]), STARTUP).actions,
    ).toEqual([]);
  });

  it("removes an engine no longer desired, naming its role", () => {
    const p = plan(desiredFor([d1]), observedOf([captured(d1), captured(d2)]), RUNNING);
    expect(p.actions).toEqual([
      { kind: "remove", engine: "engine-2", reason: "not in desired/ any more (was decode)" },
    ]);
    expect(p.serving).toEqual({ group_signature: null, pairing_class: null, engines: [], pairs: [] });
  });

  it("never sends a second remove to an engine already removing, or one whose removal is held", () => {
    for (const o of [
      captured(d2, { phase: "removing" }),
      captured(d2, { phase: "checked", deferred: { remove: true } }),
    ]) {
      const p = plan(desiredFor([d1]), observedOf([captured(d1), o]), RUNNING);
      expect(p.actions).toEqual([
        {
          kind: "wait",
          engine: "engine-2",
          why: "its removal is under way; it is not stopped a second time",
          until: "step",
        },
      ]);
      expect(p.changes).toBe(false);
    }
  });

  it("does nothing for a removed engine no longer desired", () => {
    expect(
      plan(
        desiredFor([d1]),
        observedOf([captured(d1), captured(d2, { phase: "removed", handle: null, liveness: null })]),
        RUNNING,
      ).actions,
    ).toEqual([]);
  });

  it("removes once its engine can be observed (unknown liveness waits)", () => {
    const p = plan(desiredFor([d1]), observedOf([captured(d1), captured(d2, { liveness: "unknown" })]), RUNNING);
    expect(p.actions).toEqual([
      { kind: "wait", engine: "engine-2", why: expect.stringMatching(/cannot be observed/), until: "observation" },
    ]);
  });

  it("re-desired during a held removal (deferred.remove): waits for the step, then is created anew", () => {
    const p = plan(
      desiredFor([d1, d2]),
      observedOf([captured(d1), captured(d2, { phase: "replacing", deferred: { remove: true } })]),
      RUNNING,
    );
    expect(p.actions).toEqual([
      {
        kind: "wait",
        engine: "engine-2",
        why: expect.stringMatching(/desired again while its removal is held/),
        until: "step",
      },
    ]);
  });

  it("re-desired while removing: waits for the stop, no second stop", () => {
    const p = plan(desiredFor([d1, d2]), observedOf([captured(d1), captured(d2, { phase: "removing" })]), RUNNING);
    expect(p.actions).toEqual([
      {
        kind: "wait",
        engine: "engine-2",
        why: expect.stringMatching(/removal is under way.*no second stop/),
        until: "step",
      },
    ]);
  });

  it("waits on a step that cannot be abandoned when a desired event is already held", () => {
    const e1 = desiredOf(compatibleEdit(s1));
    const p = plan(
      desiredFor([e1, d2]),
      observedOf([captured(d1, { phase: "checked", deferred: { desiredHash: e1.input_hash } }), captured(d2)]),
      RUNNING,
    );
    expect(p.actions).toEqual([
      {
        kind: "wait",
        engine: "engine-1",
        why: expect.stringMatching(/cannot be abandoned runs \(checked\)/),
        until: "step",
      },
    ]);
    expect(p.rollout).toEqual([{ engines: ["engine-1"], incompatible: false, status: "later" }]);
  });
});

describe("plan: replace", () => {
  const [s1, s2] = fleetSpecs(1, 1) as [ReturnType<typeof specOf>, ReturnType<typeof specOf>];
  const d1 = desiredOf(s1);
  const d2 = desiredOf(s2);

  it("replaces an edited engine, naming the field with old and new value", () => {
    const e2 = desiredOf(compatibleEdit(s2, "a"));
    const p = plan(desiredFor([d1, e2]), observedOf([captured(d1), captured(d2)]), RUNNING);
    expect(p.actions).toEqual([
      {
        kind: "replace",
        engine: "engine-2",
        role: "decode",
        from_hash: d2.input_hash,
        to_hash: e2.input_hash,
        group_changes: false,
        fields: [{ path: "model.served_name", old: "tiny", new: "tiny-a", group: false }],
        reason: `inputs changed from ${d2.input_hash.slice(0, 8)} to ${e2.input_hash.slice(0, 8)}: model.served_name (deployment.env NARWHAL_ENGINE_MODEL_NAME) ("tiny" → "tiny-a")`,
      },
    ]);
    expect(p.rollout).toEqual([{ engines: ["engine-2"], incompatible: false, status: "now" }]);
    expect(p.changes).toBe(true);
    // Released: out of the serving fleet from now on, and the prefill left has no decode to pair with.
    expect(p.serving).toEqual({ group_signature: null, pairing_class: null, engines: [], pairs: [] });
  });

  it("an extra_args edit names the argument and changes the group signature (the runtime record is a group input)", () => {
    const base = s2.launch.runtime.extra_args.length;
    const e2 = desiredOf(argsEdit(s2, "a"));
    const r = plan(desiredFor([d1, e2]), observedOf([captured(d1), captured(d2)]), RUNNING).actions[0]!;
    expect(r).toMatchObject({
      kind: "replace",
      group_changes: true,
      fields: [{ path: `launch.runtime.extra_args[${base}]`, old: null, new: "--tag=a", group: true }],
    });
    expect((r as { reason: string }).reason).toMatch(/; changes the group signature$/);
  });

  it("cannot name the fields when the applied inputs were not recorded: assumes the group changes, and says so", () => {
    const e2 = desiredOf(compatibleEdit(s2));
    const p = plan(desiredFor([d1, e2]), observedOf([captured(d1), captured(d2, { applied_inputs: null })]), RUNNING);
    const r = p.actions.find((a) => a.kind === "replace")!;
    expect(r).toMatchObject({ fields: null, group_changes: true });
    expect((r as { reason: string }).reason).toMatch(/not recorded.*assumed to change the group signature/);
  });

  it("revert mid-replacement: sends the retiring engine's hash as a replace (the machine restores it itself)", () => {
    const e2 = desiredOf(compatibleEdit(s2));
    const p = plan(desiredFor([d1, d2]), observedOf([captured(d1), released(d2, e2, "prepared")]), RUNNING);
    expect(p.actions).toEqual([
      expect.objectContaining({
        kind: "replace",
        engine: "engine-2",
        from_hash: e2.input_hash,
        to_hash: d2.input_hash,
      }),
    ]);
    expect((p.actions[0] as { reason: string }).reason).toMatch(/went back to what its retiring engine serves/);
  });

  it("a lost engine with a pending change is restarted and replaced in one plan (it serves nothing either way)", () => {
    const e2 = desiredOf(compatibleEdit(s2));
    const p = plan(desiredFor([d1, e2]), observedOf([captured(d1), captured(d2, { liveness: "gone" })]), RUNNING);
    expect(kinds(p.actions)).toEqual(["restart-lost engine-2", "replace engine-2"]);
  });

  it("orders actions as the controller executes them: adopt, restart, remove, create, replace, sweep, waits last", () => {
    const specs = fleetSpecs(2, 2);
    const ds = specs.map(desiredOf);
    const edited = [
      ds[0]!,
      desiredOf(compatibleEdit(specs[1]!)),
      ds[2]!,
      desiredOf(specOf(7, "decode")),
      desiredOf(specOf(8, "decode")),
    ];
    const o: Observed = observedOf(
      [captured(ds[0]!), captured(ds[1]!), captured(ds[2]!, { liveness: "gone" }), captured(ds[3]!)],
      {
        owned: [owned("engine-8", "tok-8"), owned("engine-9", "tok-9")],
      },
    );
    expect(kinds(plan(desiredFor(edited), o, STARTUP).actions)).toEqual([
      "adopt engine-8",
      "restart-lost engine-3",
      "remove engine-4",
      "create engine-7",
      "replace engine-2",
      "sweep-orphan engine-9",
    ]);
  });
});
