// `narwhal status` as data: which process an engine's row names.
import { describe, expect, it } from "vitest";
import { renderStatusText, statusView } from "../../src/cli/status-view.js";
import { record, stateFile } from "../controller/records.js";

const oldHandle = { kind: "native" as const, pid: 777, pgid: 777, boot_id: "boot", start_ticks: 5, launch_token: "old" };

describe("status view", () => {
  it("names the live engine's process", () => {
    const [e] = statusView(stateFile([record("engine-1")])).engines;
    expect(e).toMatchObject({ pid: 4242, container_id: null, retiring: false });
  });

  it("names the engine kept serving old inputs while its replacement is prepared", () => {
    const r = record("engine-1", { phase: "failed", handle: null, snapshot: { value: "failed", context: { engine: "engine-1", retiring: { handle: oldHandle, run: null, hash: "9".repeat(64) } } } });
    const view = statusView(stateFile([r]));
    expect(view.engines[0]).toMatchObject({ pid: 777, retiring: true, snapshot: undefined });
    expect(renderStatusText(view, false)).toMatch(/engine-1 +failed .* 777 \(retiring\)/);
  });

  it("names no process when none runs", () => {
    const [e] = statusView(stateFile([record("engine-1", { phase: "pending", handle: null, snapshot: null })])).engines;
    expect(e).toMatchObject({ pid: null, container_id: null, retiring: false });
  });
});
