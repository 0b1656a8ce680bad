// Kill-point campaign on the native backend: SIGKILL the controller at every
// transition and around every side effect, rerun, and check that nothing was
// lost or duplicated.
import { afterAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, status, teardown } from "./cli.js";
import { assertConverged, editCheckedPlan, killAt, killSpec, reconcileOnce, type KillPoint } from "./campaign.js";

const ENGINES = ["engine-1", "engine-2"];
const native = (stateDir: string) => async () =>
  (await engineProcesses(stateDir)).map((p) => ({ engine: p.engine, id: String(p.pid) }));
const tally = { points: new Set<string>(), runs: 0 };

const at = (names: string[], hits: number[]): KillPoint[] =>
  names.flatMap((name) => hits.map((hit) => ({ name, hit })));

const COLD: KillPoint[] = [
  ...at(
    [
      "transition:inspected",
      "transition:prepared",
      "transition:checked",
      "transition:started",
      "transition:probed",
      "transition:captured",
    ],
    [1, 2],
  ),
  ...at(["native:check:running", "native:spawn:before", "native:spawn:after"], [1, 2]),
  ...at(["kv:prove:before", "kv:prove:after", "attest:spawn:before", "attest:spawn:after"], [1]),
  ...at(["state:write:before", "state:write:after"], [1, 5, 9, 13]),
];

const REPLACE: KillPoint[] = [
  ...at(
    [
      "transition:pending",
      "transition:replacing",
      "native:stop:before",
      "native:stop:after",
      "native:spawn:before",
      "native:spawn:after",
      "transition:checked",
      "transition:captured",
    ],
    [1],
  ),
  ...at(["state:write:after"], [2, 6]),
];

describe("kill-point campaign (native)", () => {
  afterAll(() => {
    console.log(
      `kill-point campaign (native): ${tally.points.size} kill points, ${tally.runs} killed runs, each followed by a clean rerun`,
    );
  });

  describe("cold start", () => {
    for (const point of COLD) {
      it(`SIGKILL at ${killSpec(point)}, then rerun`, async () => {
        const fleet = await simFleet();
        try {
          await killAt(fleet, point);
          tally.points.add(killSpec(point));
          tally.runs++;
          const r = await reconcileOnce(fleet);
          expect(r.code, r.stderr.slice(-3000)).toBe(0);
          await assertConverged(fleet, ENGINES, native(fleet.stateDir));
        } finally {
          await teardown(fleet.stateDir);
        }
      });
    }
  });

  describe("replacement of engine-2", () => {
    let fleet: SimFleet;
    let engine1 = "";
    let generation = 0;
    afterAll(() => teardown(fleet.stateDir));

    for (const point of REPLACE) {
      it(`SIGKILL at ${killSpec(point)}, then rerun`, async () => {
        if (!fleet) {
          // Each replacement edits engine-2's runtime alone, which splits the pair into two groups (seed 000),
          // where a proof would rightly find no pair: this fleet does not prove (the cold campaign's do).
          fleet = await simFleet({ kvTransfer: { prove: false } });
          expect((await reconcileOnce(fleet)).code).toBe(0);
          engine1 = (await assertConverged(fleet, ENGINES, native(fleet.stateDir), { proofs: false }))["engine-1"]!.id;
        }
        await fleet.write({ engines: [{}, { extraArgs: ["--max-num-seqs", String(100 + ++generation)] }] });
        await killAt(fleet, point);
        tally.points.add(`replace/${killSpec(point)}`);
        tally.runs++;
        const r = await reconcileOnce(fleet);
        expect(r.code, r.stderr.slice(-3000)).toBe(0);
        const live = await assertConverged(fleet, ENGINES, native(fleet.stateDir), { proofs: false });
        expect(live["engine-1"]!.id, "the unchanged engine is never touched").toBe(engine1);
      });
    }
  });
});

describe("a launch.json edited while its engine is checked (native)", () => {
  it("is refused before start: terminal, naming the file and both hashes; the edited command never runs", async () => {
    const fleet = await simFleet();
    try {
      // Before the spawn, the start step has waited for `checked` to be on disk: the engine is checked, nothing runs yet.
      await killAt(fleet, { name: "native:spawn:before", hit: 1 });
      const edit = await editCheckedPlan(fleet);
      const r = await reconcileOnce(fleet);
      expect(r.code, r.stderr.slice(-3000)).toBe(2);
      const e = (await status(fleet.stateDir)).engines.find((x) => x.engine === edit.engine)!;
      expect(e.phase).toBe("failed");
      expect(e.last_error).toMatchObject({ step: "start", retryable: false, input: edit.planFile });
      for (const s of [edit.planFile, edit.checkedSha, edit.editedSha]) expect(e.last_error!.message).toContain(s);
      expect(await edit.markerExists(), "the edited command ran").toBe(false);
      expect((await engineProcesses(fleet.stateDir)).map((p) => p.engine)).not.toContain(edit.engine);

      // The operator's next run starts the engine over from a fresh prepared and checked run; the edited plan stays unrun.
      const again = await reconcileOnce(fleet);
      expect(again.code, again.stderr.slice(-3000)).toBe(0);
      const after = (await status(fleet.stateDir)).engines.find((x) => x.engine === edit.engine)!;
      expect(after.phase).toBe("captured");
      expect(after.run_dir).not.toBe(edit.runDir);
      expect(await edit.markerExists()).toBe(false);
    } finally {
      await teardown(fleet.stateDir);
    }
  });
});

describe("a launch.json edited while its engine is being checked (native)", () => {
  it("is refused by the check itself: the edited plan is never bound by a checked.json, nor run", async () => {
    const fleet = await simFleet();
    try {
      // The check step has waited for `prepared` to be on disk; the check script runs, no checked.json yet.
      await killAt(fleet, { name: "native:check:running", hit: 1 });
      const edit = await editCheckedPlan(fleet, { phase: "prepared" });
      const r = await reconcileOnce(fleet);
      expect(r.code, r.stderr.slice(-3000)).toBe(2);
      const e = (await status(fleet.stateDir)).engines.find((x) => x.engine === edit.engine)!;
      expect(e.phase).toBe("failed");
      expect(e.last_error).toMatchObject({ step: "check", retryable: false, input: edit.planFile });
      expect(e.last_error!.message).toContain(
        `${edit.planFile} hashes to ${edit.editedSha}, but the state file's record of the prepared run binds ${edit.checkedSha}`,
      );
      await expect(fs.access(path.join(edit.runDir, "checked.json")), "the edited plan was checked").rejects.toThrow();
      expect(await edit.markerExists(), "the edited command ran").toBe(false);
      expect((await engineProcesses(fleet.stateDir)).map((p) => p.engine)).not.toContain(edit.engine);
    } finally {
      await teardown(fleet.stateDir);
    }
  });
});
