// `narwhal status` as data: which process an engine's row names, and the three
// input hashes — desired/ now, applied by the controller, running.
import { describe, expect, it } from "vitest";
import { NOT_CREATED, statusView, type DesiredNow } from "../../src/cli/status-view.js";
import { renderStatusText } from "../../src/cli/status-render.js";
import { record, stateFile } from "../controller/records.js";

const oldHandle = {
  kind: "native" as const,
  pid: 777,
  pgid: 777,
  boot_id: "boot",
  start_ticks: 5,
  launch_token: "old",
};
const H1 = "1".repeat(64);
const H3 = "3".repeat(64);
const H9 = "9".repeat(64);

function desired(engines: Record<string, string>): DesiredNow {
  return {
    dir: "/d",
    valid: true,
    engines: Object.fromEntries(
      Object.entries(engines).map(([n, h]) => [n, { input_hash: h, backend: "native", role: "prefill" }]),
    ),
    issues: 0,
    problem: null,
  };
}

describe("status view", () => {
  it("names the live engine's process", () => {
    const [e] = statusView(stateFile([record("engine-1")])).engines;
    expect(e).toMatchObject({ pid: 4242, container_id: null, retiring: false });
  });

  it("names the engine kept serving old inputs while its replacement is prepared, and its hash as RUNNING", () => {
    const r = record("engine-1", {
      phase: "failed",
      handle: null,
      running_hash: null,
      snapshot: {
        value: "failed",
        context: { engine: "engine-1", retiring: { handle: oldHandle, run: null, hash: H9 } },
      },
    });
    const view = statusView(stateFile([r]));
    expect(view.engines[0]).toMatchObject({
      pid: 777,
      retiring: true,
      snapshot: undefined,
      running_hash: H9,
      applied_hash: H1,
    });
    expect(renderStatusText(view, false)).toMatch(/engine-1 +failed .* 777 \(retiring\)/);
  });

  it("lists engines in the order an operator reads their names (engine-2 before engine-10), as plan does", () => {
    const view = statusView(stateFile([record("engine-10"), record("engine-2")]), {
      desired: desired({ "engine-1": H1, "engine-10": H1, "engine-2": H1 }),
    });
    expect(view.engines.map((e) => e.engine)).toEqual(["engine-1", "engine-2", "engine-10"]);
  });

  it("names no process when none runs", () => {
    const [e] = statusView(stateFile([record("engine-1", { phase: "pending", handle: null, snapshot: null })])).engines;
    expect(e).toMatchObject({ pid: null, container_id: null, retiring: false, running_hash: H1 });
  });

  it("shows DESIRED from desired/ now beside APPLIED: a pending edit differs for exactly that engine", () => {
    const view = statusView(stateFile([record("engine-1"), record("engine-2")]), {
      desired: desired({ "engine-1": H1, "engine-2": H3 }),
    });
    const [e1, e2] = view.engines;
    expect(e1).toMatchObject({ desired_hash_now: H1, applied_hash: H1, desired_hash: H1, running_hash: H1 });
    expect(e2).toMatchObject({ desired_hash_now: H3, applied_hash: H1, desired_hash: H1, running_hash: H1 });
    const text = renderStatusText(view, false);
    expect(text.split("\n")[0]).toMatch(/^ENGINE +PHASE +AGE +LIVE +DESIRED +APPLIED +RUNNING +OBSERVED/);
    expect(text).toMatch(/engine-1 +captured +\S+ +- +111111111111 +111111111111 +111111111111 /);
    expect(text).toMatch(/engine-2 +captured +\S+ +- +333333333333 +111111111111 +111111111111 /);
  });

  it("lists an engine desired but not in the state as (not created), and one no longer desired with DESIRED -", () => {
    const view = statusView(stateFile([record("engine-1")]), { desired: desired({ "engine-2": H3 }) });
    expect(view.engines.map((e) => [e.engine, e.phase, e.desired_hash_now, e.applied_hash])).toEqual([
      ["engine-1", "captured", null, H1],
      ["engine-2", NOT_CREATED, H3, null],
    ]);
    expect(renderStatusText(view, false)).toMatch(/engine-2 +\(not created\) +- +- +333333333333 +- +- /);
    expect(
      statusView(stateFile([record("engine-1")]), { desired: desired({ "engine-2": H3 }), engine: "engine-2" }).engines,
    ).toHaveLength(1);
  });

  it("says once above the table that desired/ is invalid, and shows ? for DESIRED", () => {
    const problem = "desired state /d is invalid (3 errors): run narwhal validate --desired /d; DESIRED shows ?";
    const view = statusView(stateFile([record("engine-1"), record("engine-2")]), {
      desired: { dir: "/d", valid: false, engines: null, issues: 3, problem },
    });
    const lines = renderStatusText(view, false).split("\n");
    expect(lines.filter((l) => l.includes("is invalid"))).toEqual([problem]);
    expect(lines.findIndex((l) => l.includes("is invalid"))).toBeLessThan(
      lines.findIndex((l) => l.startsWith("ENGINE")),
    );
    for (const e of view.engines) expect(e.desired_hash_now).toBeNull();
    expect(lines.find((l) => l.startsWith("engine-2"))).toMatch(/engine-2 +captured +\S+ +- +\? +111111111111/);
  });
});
