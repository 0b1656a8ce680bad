// `narwhal plan` as text: a symbol and reason per engine, the fields that force a replacement with
// old and new values, rollout steps in order, halts, warnings, the serving fleet and the summary.
import { describe, expect, it } from "vitest";
import { desiredLabel, renderPlanText, summaryLine } from "../../src/cli/plan-render.js";
import { savedPlan } from "../../src/controller/plan-file.js";
import type { Action, Plan, RolloutPolicy } from "../../src/controller/plan-types.js";
import {
  desired,
  EVERY_ACTION,
  hashOf,
  NO_CHANGES,
  observed,
  REPLACE_ENGINE_1,
  ROLLOUT,
} from "../controller/plan-file-fixtures.js";
import { LAUNCHER } from "../phases/plan-fixtures.js";

const text = (plan: Plan, rollout: RolloutPolicy = ROLLOUT) =>
  renderPlanText(
    savedPlan({ desired: desired(undefined, rollout), observed: observed(), plan, desiredDir: "/d", stateDir: "/s" }),
    "desired/",
  );

describe("plan text", () => {
  it("says there is nothing to do, and still lists the serving fleet", () => {
    expect(text(NO_CHANGES)).toBe(
      [
        "Serving fleet for this observation (group 0123456789abcdef):",
        "  engine-1 prefill http://127.0.0.1:18101",
        "  engine-2 decode http://127.0.0.1:18102",
        "",
        "No changes. The fleet matches desired/.",
      ].join("\n"),
    );
  });

  it("lists the proven pairs under the serving fleet", () => {
    const plan: Plan = {
      ...NO_CHANGES,
      serving: { ...NO_CHANGES.serving, pairs: [{ prefill: "engine-1", decode: "engine-2" }] },
    };
    expect(text(plan).split("\n")).toContain("  proven pairs: engine-1 → engine-2");
  });

  it("counts the proven pairs past eight instead of one line of thousands (a class's prefills × its decodes)", () => {
    const pairs = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ prefill: `engine-${2 * i + 1}`, decode: `engine-${2 * i + 2}` }));
    const at = (n: number) => text({ ...NO_CHANGES, serving: { ...NO_CHANGES.serving, pairs: pairs(n) } }).split("\n");
    expect(at(8)).toContain(
      `  proven pairs: ${pairs(8)
        .map((p) => `${p.prefill} → ${p.decode}`)
        .join(", ")}`,
    );
    expect(at(3984)).toContain("  proven pairs: 3984 (`--format json` lists them)");
  });

  it("shows a replacement with every changed field on its own line and the summary", () => {
    const lines = text(REPLACE_ENGINE_1).split("\n");
    expect(lines.slice(0, 2)).toEqual([
      "  ~ engine-1 (prefill)  replace: desired inputs changed (input hash 111111111111… → 999999999999…)",
      '      launch.runtime.extra_args[2]: "--max-num-seqs=8" → "--max-num-seqs=16"  (forces replacement)',
    ]);
    expect(lines).toContain("  step 1 (now): engine-1");
    expect(lines.at(-1)).toBe("Plan: 1 to replace, 0 to create, 0 to remove.");
  });

  it("marks a field that changes the group signature, an added field as absent, and fields it cannot name", () => {
    const plan: Plan = {
      ...REPLACE_ENGINE_1,
      actions: [
        {
          ...(REPLACE_ENGINE_1.actions[0] as Extract<Action, { kind: "replace" }>),
          fields: [
            { path: "model.revision", old: "sim-0001", new: "sim-0002", group: true },
            { path: "launch.runtime.environment.FOO", old: undefined, new: "x".repeat(300), group: false },
          ],
          group_changes: true,
        },
        {
          kind: "replace",
          engine: "engine-2",
          role: "decode",
          from_hash: hashOf("2"),
          to_hash: hashOf("8"),
          fields: null,
          group_changes: false,
          reason: "desired inputs changed",
        },
      ],
      rollout: [{ engines: ["engine-1", "engine-2"], incompatible: true, status: "now" }],
    };
    const lines = text(plan).split("\n");
    expect(lines[0]).toBe(
      "  ~ engine-1 (prefill)  replace: desired inputs changed (input hash 111111111111… → 999999999999…; group signature changes)",
    );
    expect(lines[1]).toBe(
      '      model.revision: "sim-0001" → "sim-0002"  (forces replacement; group signature changes)',
    );
    expect(lines[2]).toMatch(/^ {6}launch\.runtime\.environment\.FOO: \(absent\) → "x{158}…  \(forces replacement\)$/);
    expect(lines[4]).toBe("      (its applied inputs were not recorded: the fields that changed cannot be named)");
    expect(lines).toContain("  step 1 (now): engine-1, engine-2 — incompatible: moves as a P/D unit");
    expect(text(plan, { ...ROLLOUT, incompatible: "recreate" }).split("\n")).toContain(
      "  step 1 (now): engine-1, engine-2 — incompatible: all at once (recreate)",
    );
  });

  it("gives every action kind its symbol and reason, in the plan's order, and counts each in the summary", () => {
    const lines = text(EVERY_ACTION).split("\n");
    expect(lines.slice(2, 12)).toEqual([
      "  + engine-3 (prefill)  create: desired, not in the state",
      "  - engine-4  remove: no longer desired",
      "  ! engine-5  restart-lost: its process is gone",
      "  ↻ engine-6  retry: terminally failed; a new controller run gives a fresh attempt budget",
      "  ⇢ engine-7  adopt: runs with no usable record (launch token tok-7-bbbbbb…)",
      "  x engine-8  sweep orphan: claimed by no record (pid 4008, launch token tok-8-cccccc…)",
      "  ! engine-9  forget-retiring: the retiring engine is gone",
      "  ! engine-10  restart-unproven (pair with engine-3): its transfer proof with engine-3 failed (transfer-failed: 1 failed transfer)",
      "  ⇄ engine-12  prove KV transfer from engine-11: first transfer proof of engine-11 → engine-12",
      "  … engine-2  wait (rollout): the rollout holds it until engine-1 converges",
    ]);
    expect(lines).toContain("Rollout:");
    expect(lines.indexOf("  step 1 (now): engine-1")).toBeLessThan(lines.indexOf("  step 2 (later): engine-2"));
    expect(lines.at(-1)).toBe(
      "Plan: 1 to replace, 1 to create, 1 to remove, 1 to restart (lost), 1 to retry, 1 to adopt, 1 orphan(s) to sweep, 1 lost retiring engine(s) to forget, 1 decode(s) to restart (unproven pair), 1 pair(s) to prove.",
    );
  });

  it("lists halted rollouts and warnings, and an empty serving fleet as none", () => {
    const plan: Plan = {
      ...NO_CHANGES,
      actions: [{ kind: "wait", engine: "engine-2", why: "its rollout halted on engine-1", until: "halted" }],
      rollout: [{ engines: ["engine-2"], incompatible: true, status: "halted" }],
      halted: [{ engine: "engine-1", why: "its replacement failed at check: vLLM rejects --bogus" }],
      warnings: ["no compatible prefill/decode pair is captured"],
      serving: { group_signature: null, engines: [], pairs: [] },
    };
    expect(text(plan)).toBe(
      [
        "  … engine-2  wait (halted): its rollout halted on engine-1",
        "",
        "Rollout:",
        "  step 1 (halted): engine-2 — incompatible: moves as a P/D unit",
        "",
        "Halted rollouts (no further engine of the change is touched):",
        "  engine-1: its replacement failed at check: vLLM rejects --bogus",
        "",
        "Warnings:",
        "  ! no compatible prefill/decode pair is captured",
        "",
        "Serving fleet for this observation: none (no captured engine to list)",
        "",
        "No changes now, but the fleet does not match desired/ yet: 1 engine(s) wait, 1 halted (see above).",
      ].join("\n"),
    );
  });

  it("summarises by plan.changes: waits alone are no change, but not a converged fleet either", () => {
    expect(
      summaryLine({ ...NO_CHANGES, actions: [{ kind: "wait", engine: "engine-1", why: "x", until: "step" }] }, "d/"),
    ).toBe("No changes now, but the fleet does not match d/ yet: 1 engine(s) wait (see above).");
    expect(summaryLine(NO_CHANGES, "d/")).toBe("No changes. The fleet matches d/.");
  });

  it("names the desired directory as the operator did: relative below the working directory, else absolute", () => {
    expect(desiredLabel("/srv/fleet/desired", "/srv/fleet")).toBe("desired/");
    expect(desiredLabel("/srv/fleet", "/srv/fleet")).toBe("./");
    expect(desiredLabel("/etc/narwhal/desired", "/srv/fleet")).toBe("/etc/narwhal/desired/");
  });
});

describe("plan text: the launcher", () => {
  const saved = (plan: Plan) =>
    savedPlan({ desired: desired(undefined, ROLLOUT), observed: observed(), plan, desiredDir: "/d", stateDir: "/s" });

  it("heads the plan with the launcher digest and its parts, with nothing forced when none differs", () => {
    const first = renderPlanText(saved(NO_CHANGES), "desired/", LAUNCHER).split("\n")[0];
    expect(first).toBe(
      `Launcher: narwhal 0.1.0, digest ${LAUNCHER.digest} (plan format ${LAUNCHER.plan_format}; check_runtime.py ffffffffffff, inspect_runtime.py dddddddddddd)`,
    );
  });

  it("says the launcher forces the replacement of an engine whose running launcher differs, and names the part", () => {
    const other = { ...LAUNCHER, version: "0.0.9", digest: "a".repeat(64) };
    const replace = REPLACE_ENGINE_1.actions[0] as Extract<Action, { kind: "replace" }>;
    const plan: Plan = {
      ...REPLACE_ENGINE_1,
      actions: [
        {
          ...replace,
          fields: [
            { path: "launcher.digest", old: other.digest, new: LAUNCHER.digest, group: false },
            { path: "launcher.version", old: "0.0.9", new: "0.1.0", group: false },
          ],
        },
      ],
    };
    const lines = renderPlanText(saved(plan), "desired/", LAUNCHER).split("\n");
    expect(lines[0]).toMatch(/ {2}\(forces replacement: differs from the launcher of engine-1\)$/);
    expect(lines).toContain('      launcher.version: "0.0.9" → "0.1.0"  (forces replacement)');
  });
});
