// `status --watch`'s loop: each look reads the status once and renders it once
// (on a terminal, the redraw; into a pipe, the comparison, and the printed
// block only when it changed). The reads and renders are the real ones, counted.
import { describe, expect, it } from "vitest";
import { watchStatus, type WatchIo } from "../../src/cli/status-watch.js";
import { statusView, type StatusView } from "../../src/cli/status-view.js";
import { renderStatusText } from "../../src/cli/status-render.js";
import { loadConfig } from "../../src/config.js";
import { record, stateFile } from "../controller/records.js";

const config = loadConfig({ state: "/nonexistent/state", desired: "/nonexistent/desired" }, {});

/** `looks` reads of the given views in turn (the last one repeated), then the watch is stopped. */
async function watch(isTTY: boolean, views: StatusView[], looks: number) {
  const ac = new AbortController();
  const counts = { reads: 0, renders: 0 };
  const io: WatchIo = {
    read: () => {
      counts.reads++;
      if (counts.reads === looks) ac.abort();
      return Promise.resolve(views[Math.min(counts.reads, views.length) - 1]!);
    },
    render: (...args) => {
      counts.renders++;
      return renderStatusText(...args);
    },
  };
  const written: string[] = [];
  const tty = { isTTY } as NodeJS.WriteStream;
  await watchStatus(config, { intervalMs: 1, noColor: true, tty, signal: ac.signal }, (s) => written.push(s), io);
  return { ...counts, written };
}

describe("status --watch", () => {
  // No controller line: what the loop does is the same for any view.
  const captured = statusView(stateFile([record("engine-1")]), {});
  const stopped = statusView(stateFile([record("engine-1", { phase: "stopped", handle: null })]), {});

  it("on a terminal: one read and one render per look, each look redrawn", async () => {
    const r = await watch(true, [captured], 4);
    expect(r).toMatchObject({ reads: 4, renders: 4 });
    expect(r.written).toHaveLength(4);
    expect(r.written[0]).toMatch(/^\x1b\[H\x1b\[2J.*every 0.001 s\n/);
  });

  it("into a pipe: one render per unchanged look, the printed block's own only when it changed", async () => {
    const r = await watch(false, [captured, captured, stopped, stopped, stopped], 5);
    expect(r.reads).toBe(5);
    // Five comparisons, and two printed blocks (the first look, and the change).
    expect(r.renders).toBe(5 + 2);
    expect(r.written).toHaveLength(2);
    expect(r.written[1]).toMatch(/engine-1 +stopped/);
  });
});
