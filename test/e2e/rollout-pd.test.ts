// A P/D-aware rollout of an incompatible change (issue 9, acceptance 4): a
// simulated 2 prefill + 2 decode fleet moves to another model revision (a second
// model directory whose config.json differs, so the group signature changes).
// state/serving-fleet.json, read from disk after every transition and every
// serving write the controller reports, never pairs a prefill and a decode of
// different groups and always keeps one compatible pair listed.
import fs from "node:fs";
import fsp from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ControllerHarness, recordPid } from "./controller-harness.js";
import { REPO, type SimEngineOptions } from "./sim-fleet.js";
import type { ServingFleet } from "../../src/controller/plan-types.js";
import { alive } from "../desired-corpus/controller-harness.js";

const ENGINES = ["engine-1", "engine-2", "engine-3", "engine-4"];
const ROLE: Record<string, string> = {
  "engine-1": "prefill",
  "engine-2": "prefill",
  "engine-3": "decode",
  "engine-4": "decode",
};
const FLEET: SimEngineOptions[] = ENGINES.map((e) => ({ role: ROLE[e] }));
/** rollout.max_unavailable's documented default, per role. */
const MAX_UNAVAILABLE = 1;

/** A copy of the tiny-llama fixture whose config.json differs: another model revision, another group. */
async function secondRevision(): Promise<string> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), "narwhal-model-rev2-"));
  const src = path.join(REPO, "test/sim/models/tiny-llama");
  for (const f of await fsp.readdir(src)) await fsp.copyFile(path.join(src, f), path.join(dir, f));
  const config = JSON.parse(await fsp.readFile(path.join(dir, "config.json"), "utf8"));
  await fsp.writeFile(
    path.join(dir, "config.json"),
    JSON.stringify({ ...config, narwhal_fixture_revision: "sim-0002" }, null, 2),
  );
  return dir;
}

interface Sample {
  after: string;
  fleet: ServingFleet | null;
}

/** Pairing problems of one serving-fleet.json: roles of different groups, or engines outside the file's group. */
function pairingProblems(f: ServingFleet): string[] {
  const pd = f.engines.filter((e) => e.role === "prefill" || e.role === "decode");
  const groups = new Set(pd.map((e) => e.group_signature));
  const out: string[] = [];
  if (groups.size > 1)
    out.push(
      `prefill/decode engines of ${groups.size} groups listed: ${pd.map((e) => `${e.engine}(${e.role})=${e.group_signature}`).join(", ")}`,
    );
  if (pd.length > 0 && f.group_signature !== pd[0]!.group_signature)
    out.push(`group_signature ${f.group_signature} is not the listed engines' ${pd[0]!.group_signature}`);
  return out;
}

const hasPair = (f: ServingFleet | null) =>
  !!f && f.engines.some((e) => e.role === "prefill") && f.engines.some((e) => e.role === "decode");

describe("a P/D-aware rollout of an incompatible change", () => {
  let h: ControllerHarness | undefined;
  afterAll(async () => {
    await h?.close();
  });

  it(
    "moves 2 prefill + 2 decode engines to a new model revision keeping one compatible pair serving, never pairing across groups",
    { timeout: 420_000 },
    async () => {
      h = await ControllerHarness.create({ fleet: { engines: FLEET }, waitMs: 300_000 });
      const harness = h;
      const servingFile = path.join(h.fleet.stateDir, "serving-fleet.json");
      const samples: Sample[] = [];
      // Synchronously, at the instant the controller reports: the file as a router would read it then.
      h.listen((event) => {
        let fleet: ServingFleet | null = null;
        try {
          fleet = JSON.parse(fs.readFileSync(servingFile, "utf8")) as ServingFleet;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
        }
        const after = event.transition ? `${event.transition.engine} → ${event.transition.to}` : "serving write";
        samples.push({ after, fleet });
      });

      h.controller.apply(await h.desired());
      const converged = await h.untilCaptured(ENGINES);
      await h.until("serving-fleet.json listing all four", (v) => v.serving.at(-1)?.engines.length === 4);
      await h.settle();
      const oldGroup = converged.engines["engine-1"]!.group_signature;
      const oldPids = ENGINES.map((e) => recordPid(converged.engines[e]));
      const firstConverge = samples.length;

      const modelDir = await secondRevision();
      const next = await h.edit((o) => ({ ...o, modelDir, modelRevision: "sim-0002" }));
      const m = h.mark();
      h.controller.apply(next);
      const wanted = Object.fromEntries(next.specs.map((s) => [s.name, s.input_hash]));
      const done = await h.until("all four captured at the new revision and listed", async (v) => {
        const s = await v.state();
        const all = ENGINES.every((e) => {
          const r = s.engines[e];
          return r?.phase === "captured" && r.desired_hash === wanted[e] && r.running_hash === wanted[e];
        });
        const listed = v.serving.at(-1);
        return all && listed && listed.engines.length === 4 && listed.group_signature !== oldGroup ? s : undefined;
      });
      await h.settle();

      const newGroup = done.engines["engine-1"]!.group_signature;
      expect(newGroup).not.toBe(oldGroup);
      for (const e of ENGINES) expect(done.engines[e]!.group_signature, e).toBe(newGroup);

      // (b) Never a prefill and a decode of different groups, at any instant the file was read.
      const mixed = samples.flatMap((s, i) =>
        s.fleet ? pairingProblems(s.fleet).map((p) => `#${i} after ${s.after}: ${p}`) : [],
      );
      expect(mixed).toEqual([]);
      // (c) From the first converge on, one compatible pair always listed.
      const unpaired = samples
        .slice(firstConverge)
        .flatMap((s, i) =>
          hasPair(s.fleet) ? [] : [`#${firstConverge + i} after ${s.after}: ${JSON.stringify(s.fleet)}`],
        );
      expect(unpaired, harness.describe(80)).toEqual([]);
      // At the end: all four, in the new group, with their fleet records.
      const last = samples.at(-1)!.fleet!;
      expect(last.group_signature).toBe(newGroup);
      expect(last.engines.map((e) => [e.engine, e.role, e.group_signature]).sort()).toEqual(
        ENGINES.map((e) => [e, ROLE[e], newGroup]),
      );
      for (const e of last.engines) {
        const k = Number(e.engine.slice("engine-".length));
        expect(e.iid).toBe(`n${k}`);
        expect(e.url).toBe(`http://127.0.0.1:${harness.fleet.ports[k - 1]![0]}`);
      }

      // The file moved from the old group to the new one while old engines still ran (not only at the end).
      const afterEdit = samples.slice(firstConverge);
      const switched = afterEdit.findIndex((s) => s.fleet?.group_signature === newGroup);
      expect(switched, "serving-fleet.json moved to the new group").toBeGreaterThan(0);
      expect(
        afterEdit[switched]!.fleet!.engines.length,
        "the new group was listed before the last old engine went",
      ).toBeLessThan(4);
      // (a) At most max_unavailable engines per role out of service at once: from leaving
      // captured after the edit (released) until captured again at the new inputs.
      const out = new Set<string>();
      const worst: Record<string, number> = { prefill: 0, decode: 0 };
      for (const t of harness.since(m)) {
        if (t.to === "captured") out.delete(t.engine);
        else out.add(t.engine);
        const role = ROLE[t.engine]!;
        worst[role] = Math.max(worst[role]!, [...out].filter((e) => ROLE[e] === role).length);
      }
      expect(worst, harness.describe(80)).toEqual({ prefill: MAX_UNAVAILABLE, decode: MAX_UNAVAILABLE });

      // Every old engine replaced, one new process each.
      const procs = await harness.processes();
      expect(procs.map((p) => p.engine).sort()).toEqual(ENGINES);
      for (const [i, e] of ENGINES.entries()) {
        expect(alive(oldPids[i]!), `${e}'s old engine`).toBe(false);
        expect(procs.find((p) => p.engine === e)!.pid).toBe(recordPid(done.engines[e]));
      }
    },
  );
});
