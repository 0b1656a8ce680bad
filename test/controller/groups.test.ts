// Cache-equivalence groups (seed 000) and the `status` view built on them.
import { describe, expect, it } from "vitest";
import { groupReport, renderGroups } from "../../src/controller/groups.js";
import { statusView } from "../../src/cli/status-view.js";
import { layout, record, SIG_A, SIG_B, stateFile } from "./records.js";

describe("groupReport / renderGroups", () => {
  it("prints the seed's format with the first engine by sorted name as representative", () => {
    const groups = groupReport([record("engine-2"), record("engine-1")]);
    expect(groups).toEqual([
      { signature: SIG_A, representative: "engine-1", roles: ["engine-1", "engine-2"], differing: [] },
    ]);
    expect(renderGroups(groups)).toBe(`${SIG_A}: representative=engine-1; roles=engine-1,engine-2`);
  });

  it("orders names as the seed's sorted() does (engine-10 before engine-2)", () => {
    const groups = groupReport([record("engine-2"), record("engine-10")]);
    expect(groups[0]!.representative).toBe("engine-10");
    expect(groups[0]!.roles).toEqual(["engine-10", "engine-2"]);
  });

  it("sorts groups by signature, one line each", () => {
    const groups = groupReport([
      record("engine-3", { group_signature: SIG_A }),
      record("engine-1", { group_signature: SIG_B }),
      record("engine-2", { group_signature: SIG_A }),
    ]);
    expect(renderGroups(groups).split("\n")).toEqual([
      `${SIG_A}: representative=engine-2; roles=engine-2,engine-3`,
      `${SIG_B}: representative=engine-1; roles=engine-1`,
    ]);
  });

  it("lists a member whose captured layout differs from the representative's", () => {
    const groups = groupReport([
      record("engine-1"),
      record("engine-2", { layout: layout("engine-2", { num_gpu_blocks: 1900 }) }),
      record("engine-3", { layout: null, phase: "started" }),
    ]);
    expect(groups[0]!.differing).toEqual(["engine-2"]);
    expect(groups[0]!.roles).toEqual(["engine-1", "engine-2", "engine-3"]);
    expect(renderGroups(groups)).toBe(
      `${SIG_A}: representative=engine-1; roles=engine-1,engine-2,engine-3; layout differs: engine-2`,
    );
  });

  it("skips engines without a signature", () => {
    const groups = groupReport([record("engine-1", { group_signature: null }), record("engine-2")]);
    expect(groups).toEqual([{ signature: SIG_A, representative: "engine-2", roles: ["engine-2"], differing: [] }]);
    expect(groupReport([record("engine-1", { group_signature: null })])).toEqual([]);
    expect(renderGroups([])).toBe("");
  });
});

describe("statusView", () => {
  const state = stateFile([
    record("engine-2", {
      handle: { kind: "container", container_id: "c0ffee".repeat(10), launch_token: "t2" },
      layout: layout("engine-2", { block_size: 32 }),
    }),
    record("engine-1"),
    record("engine-3", { handle: null, layout: null, phase: "failed" }),
  ]);

  it("derives pid or container id from the handle, sorted by engine", () => {
    const view = statusView(state);
    expect(view.engines.map((e) => [e.engine, e.pid, e.container_id])).toEqual([
      ["engine-1", 4242, null],
      ["engine-2", null, "c0ffee".repeat(10)],
      ["engine-3", null, null],
    ]);
    expect(view.engines.map((e) => e.layout_matches_group)).toEqual([true, false, null]);
    expect(view.groups[0]!.differing).toEqual(["engine-2"]);
  });

  it("never includes the persisted snapshot", () => {
    const view = statusView(state);
    for (const e of view.engines) expect(e.snapshot).toBeUndefined();
    expect(JSON.stringify(view)).not.toContain('"snapshot"');
    expect(JSON.stringify(view)).not.toContain('"context"');
  });

  it("filters to one engine but keeps the whole fleet's groups", () => {
    const view = statusView(state, { engine: "engine-2" });
    expect(view.engines.map((e) => e.engine)).toEqual(["engine-2"]);
    expect(view.groups[0]!.roles).toEqual(["engine-1", "engine-2", "engine-3"]);
    expect(statusView(state, { engine: "engine-9" }).engines).toEqual([]);
  });
});
