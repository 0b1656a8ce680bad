// `narwhal status` for people: the controller line, the no-controller check,
// when each engine was last observed, and the one-engine details.
import { describe, expect, it } from "vitest";
import { statusView } from "../../src/cli/status-view.js";
import {
  age,
  colours,
  controllerLine,
  engineLogWhere,
  phaseSince,
  renderStatusText,
  since,
} from "../../src/cli/status-render.js";
import { record, stateFile } from "../controller/records.js";
import { free, NOW } from "./controller-view.js";

const holder = { pid: 1234, start_ticks: 99, host: "gpu-7", boot_id: "b", since: "2026-12-01T11:00:00.000Z" };

describe("status render", () => {
  it("says how long ago, or - when never", () => {
    expect(age(null, NOW)).toBe("-");
    expect(age("2026-12-01T11:59:48.000Z", NOW)).toBe("12s ago");
    expect(age("2026-12-01T11:55:00.000Z", NOW)).toBe("5m ago");
    expect(age("2026-12-01T09:00:00.000Z", NOW)).toBe("3h ago");
    expect(age("2026-11-28T12:00:00.000Z", NOW)).toBe("3d ago");
    expect(age("2026-12-01T12:00:05.000Z", NOW)).toBe("0s ago"); // a clock a little ahead
  });

  it("names the running controller's pid, host and since", () => {
    expect(controllerLine({ ...free, running: true, holder })).toBe(
      "controller: running, pid 1234 on host gpu-7 since 2026-12-01T11:00:00.000Z",
    );
    expect(controllerLine({ ...free, running: true, holder, remote: true })).toMatch(
      /pid 1234 on host gpu-7 .*another host: not checked/,
    );
  });

  it("says not running, with the state's last write, and names a stale lock's dead holder", () => {
    expect(controllerLine(free)).toBe("controller: not running (state last written 2026-12-01T11:59:00.000Z)");
    expect(controllerLine({ ...free, stale: true, holder })).toBe(
      "controller: not running (stale lock of pid 1234 on host gpu-7 since 2026-12-01T11:00:00.000Z; state last written 2026-12-01T11:59:00.000Z)",
    );
    expect(
      controllerLine({ ...free, running: null, problem: "the state lock is a directory, not a lock file" }),
    ).toMatch(/^controller: unknown \(the state lock is a directory/);
  });

  it("shows OBSERVED per engine, and the no-controller check in LIVE with one line above the table", () => {
    const state = stateFile([record("engine-1", { observed_at: "2026-12-01T11:59:48.000Z" }), record("engine-2")]);
    const live = {
      at: "2026-12-01T12:00:00.000Z",
      engines: {
        "engine-1": { liveness: "alive" as const, problem: null },
        "engine-2": { liveness: "gone" as const, problem: "pid 4242 not running" },
      },
    };
    const lines = renderStatusText(statusView(state, { controller: free, live }), false, NOW).split("\n");
    expect(lines[0]).toMatch(/^controller: not running/);
    expect(lines[1]).toBe("no controller is running; checked 2 engines just now");
    expect(lines.find((l) => l.startsWith("engine-1"))).toMatch(/engine-1 +captured +\S+ +alive +.* 12s ago /);
    expect(lines.find((l) => l.startsWith("engine-2"))).toMatch(
      /engine-2 +captured +\S+ +gone: pid 4242 not running +.* - +aaaaaaaaaaaaaaaa/,
    );
  });

  it("says nothing of a check when no recorded engine had a process to check", () => {
    const view = statusView(stateFile([record("engine-1", { phase: "pending", handle: null, snapshot: null })]), {
      controller: free,
      live: { at: "x", engines: {} },
    });
    expect(renderStatusText(view, false, NOW)).not.toContain("checked");
  });

  it("with a controller running shows no check, only its observation", () => {
    const view = statusView(stateFile([record("engine-1", { observed_at: "2026-12-01T11:59:58.000Z" })]), {
      controller: { ...free, running: true, holder },
    });
    expect(view.checked).toBeNull();
    const text = renderStatusText(view, false, NOW);
    expect(text).not.toContain("checked");
    expect(text).toMatch(/engine-1 +captured +\S+ +- +.* 2s ago /);
  });

  it("shows the lock holder, the three hashes, the observation and the check in one engine's details", () => {
    const state = stateFile([record("engine-1", { observed_at: "2026-12-01T11:59:00.000Z" })]);
    const live = {
      at: "x",
      engines: {
        "engine-1": {
          liveness: "unknown" as const,
          problem: "pid 4242 exists but /proc/4242/stat cannot be read (hidepid?)",
        },
      },
    };
    const desired = {
      dir: "/d",
      valid: false,
      engines: null,
      issues: 1,
      problem: "desired state /d is invalid (1 error): run narwhal validate --desired /d; DESIRED shows ?",
    };
    const text = renderStatusText(
      statusView(state, { engine: "engine-1", controller: { ...free, stale: true, holder }, live, desired }),
      true,
      NOW,
    );
    expect(text).toContain("stale lock of pid 1234");
    expect(text).toContain(`applied ${"1".repeat(64)}`);
    expect(text).toContain(`running ${"1".repeat(64)}`);
    expect(text).toContain("desired ?");
    expect(text).toContain("observed:      60s ago (2026-12-01T11:59:00.000Z)");
    expect(text).toContain("checked now:   unknown: pid 4242 exists but /proc/4242/stat cannot be read (hidepid?)");
  });

  it("has no DESIRED column when desired/ was not read (the report after reconcile --once, which just applied it)", () => {
    const text = renderStatusText(statusView(stateFile([record("engine-1")])), true, NOW);
    expect(text.split("\n")[0]).toMatch(/^ENGINE +PHASE +AGE +LIVE +APPLIED +RUNNING +OBSERVED /);
    expect(text).not.toContain("desired");
    expect(text).toContain(`  input hash:    applied ${"1".repeat(64)}`);
  });
});

// Issue 10 item 4: an engine whose node cannot be used says so in status: once per node fault
// above the table (naming the engines it blocks), in `status ENGINE`, and in --format json.
describe("status of engines whose node cannot be used", () => {
  const reachable = (status: "True" | "False", reason: string, message: string) => ({
    type: "NodeReachable",
    status,
    reason,
    message,
    lastTransitionTime: "2026-12-01T11:58:00.000Z",
  });
  const MSG = "node node-b: cannot reach root@10.99.0.2 port 22 (Connection refused)";
  const state = stateFile([
    record("engine-1"),
    record("engine-2", { conditions: [reachable("False", "Unreachable", MSG)] }),
    record("engine-3", { conditions: [reachable("False", "Unreachable", MSG)] }),
    record("engine-4", {
      conditions: [reachable("True", "Reachable", "its node answered again: observed the engine running")],
    }),
  ]);

  it("says once above the table which engines their node blocks, and why", () => {
    const lines = renderStatusText(statusView(state, { controller: free }), false, NOW).split("\n");
    expect(lines.filter((l) => l.startsWith("NodeReachable="))).toEqual([
      `NodeReachable=False for engine-2, engine-3 (Unreachable) ${MSG} [since 2026-12-01T11:58:00.000Z]`,
    ]);
  });

  it("names each fault apart (another node, another reason)", () => {
    const two = stateFile([
      record("engine-2", { conditions: [reachable("False", "Unreachable", MSG)] }),
      record("engine-5", { conditions: [reachable("False", "HostKeyRejected", "node node-c: the host key of …")] }),
    ]);
    const lines = renderStatusText(statusView(two), false, NOW).split("\n");
    expect(lines.filter((l) => l.startsWith("NodeReachable=")).map((l) => l.split(" (")[0])).toEqual([
      "NodeReachable=False for engine-2",
      "NodeReachable=False for engine-5",
    ]);
  });

  it("shows the condition in status ENGINE, and in --format json", () => {
    const text = renderStatusText(statusView(state, { engine: "engine-2" }), true, NOW);
    expect(text).toContain(`  NodeReachable=False (Unreachable) ${MSG} [since 2026-12-01T11:58:00.000Z]`);
    const json = JSON.parse(JSON.stringify(statusView(state, { engine: "engine-2" }))) as {
      engines: Array<{ conditions: unknown[] }>;
    };
    expect(json.engines[0]!.conditions).toContainEqual(reachable("False", "Unreachable", MSG));
  });

  it("says nothing of nodes when every node answers", () => {
    const text = renderStatusText(statusView(stateFile([record("engine-1"), record("engine-4")])), false, NOW);
    expect(text).not.toContain("NodeReachable");
  });
});

describe("status render: AGE, colour and the engine's log", () => {
  const history = [
    { at: "2026-12-01T11:00:00.000Z", from: "pending", to: "captured" },
    { at: "2026-12-01T11:30:00.000Z", from: "captured", to: "failed" },
    { at: "2026-12-01T11:58:00.000Z", from: "failed", to: "captured" },
  ];

  it("shows in AGE how long each engine has been in its phase (its last transition there)", () => {
    expect(phaseSince(record("e", { history }))).toBe("2026-12-01T11:58:00.000Z");
    // No transition recorded into it: the record's last write.
    expect(phaseSince(record("e", { history: [], updated_at: "2026-12-01T10:00:00.000Z" }))).toBe(
      "2026-12-01T10:00:00.000Z",
    );
    const text = renderStatusText(statusView(stateFile([record("engine-1", { history })])), false, NOW);
    expect(text).toMatch(/^ENGINE +PHASE +AGE +LIVE /m);
    expect(text).toMatch(/^engine-1 +captured +2m +- /m);
    expect(since("2026-12-01T09:00:00.000Z", NOW)).toBe("3h");
  });

  it("paints the phase, a dead process and the last error on a terminal, keeping the columns aligned", () => {
    const state = stateFile([
      record("engine-1"),
      record("engine-2", { phase: "failed", last_error: { step: "start", message: "boom", at: "x" } as never }),
    ]);
    const view = statusView(state);
    const bare = renderStatusText(view, false, NOW);
    const painted = renderStatusText(view, false, NOW, colours);
    expect(bare).not.toContain("\x1b[");
    expect(painted).toContain("\x1b[32mcaptured");
    expect(painted).toContain("\x1b[31mfailed");
    expect(painted).toMatch(/\x1b\[31mstart: boom\x1b\[0m/);
    // Without the escapes, the painted table is the plain one: colour takes no columns.
    expect(painted.replace(/\x1b\[[0-9;]*m/g, "")).toBe(bare);
  });

  it("names where the engine's own log is, in status ENGINE", () => {
    expect(engineLogWhere(record("e"))).toBe("/state/runs/e/20250101T000000Z-11111111/engine.log");
    const remote = record("e", {
      handle: { kind: "native", pid: 1, pgid: 1, boot_id: "b", start_ticks: 1, launch_token: "t", node: "gpu-2" },
    });
    expect(engineLogWhere(remote)).toMatch(/engine\.log \(node gpu-2: that run directory on the node\)$/);
    const container = record("e", {
      backend: "container",
      handle: { kind: "container", container_id: "c".repeat(64), launch_token: "t" } as never,
    });
    expect(engineLogWhere(container)).toMatch(/^docker logs cccccccccccc on the engine's node/);
    expect(engineLogWhere(record("e", { run_dir: null, handle: null }))).toBeNull();
    const details = renderStatusText(statusView(stateFile([record("engine-1", { history })])), true, NOW);
    expect(details).toContain("  phase:         captured for 2m");
    expect(details).toContain("  engine log:    /state/runs/engine-1/20250101T000000Z-11111111/engine.log");
  });
});
