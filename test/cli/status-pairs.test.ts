// `narwhal status`'s KV transfer pairs: the fleet's as counts and the pairs of running engines not proven now,
// one engine's (`status ENGINE`) a line each.
import { describe, expect, it } from "vitest";
import { statusView } from "../../src/cli/status-view.js";
import { renderStatusText } from "../../src/cli/status-render.js";
import { record, stateFile } from "../controller/records.js";
import { free, NOW } from "./controller-view.js";

describe("status render: KV transfer pairs", () => {
  // 4 prefills (odd) × 4 decodes (even), each engine its own launch token, every pair proven 5 minutes ago
  const names = Array.from({ length: 8 }, (_, i) => `engine-${i + 1}`);
  const handle = (name: string) => ({ ...record(name).handle!, launch_token: `t-${name}` });
  const end = (engine: string) => ({
    engine,
    run_dir: `/state/runs/${engine}/r`,
    launch_token: `t-${engine}`,
    node: null,
  });
  const proof = (p: string, d: string, over: Record<string, unknown> = {}) => ({
    prefill: end(p),
    decode: end(d),
    passed: true,
    cause: null,
    message: `KV proof ${p} -> ${d} passed`,
    at: "2026-12-01T11:55:00.000Z",
    source: "proof" as const,
    failures: 0,
    ...over,
  });
  const fleet = (over: Record<string, Record<string, unknown>> = {}, running = true, engines = names) => {
    const state = stateFile(engines.map((n) => record(n, { handle: running ? handle(n) : null })));
    const [prefills, decodes] = [0, 1].map((odd) => engines.filter((_, i) => i % 2 === odd));
    const pairs = prefills!.flatMap((p) => decodes!.map((d) => [p, d] as const));
    state.proofs = Object.fromEntries(pairs.map(([p, d]) => [`${p}>${d}`, proof(p, d, over[`${p}>${d}`])])) as never;
    return state;
  };
  const pairSection = (text: string) =>
    text.split("\n").slice(text.split("\n").findIndex((l) => l.startsWith("KV transfer")));
  const render = (state: ReturnType<typeof fleet>) =>
    renderStatusText(statusView(state, { controller: free }), false, NOW);

  it("counts a fleet's proven pairs in one line with the oldest proof's age, instead of a line each", () => {
    const state = fleet({
      "engine-3>engine-6": { at: "2026-12-01T11:50:00.000Z" }, // the oldest proven
      "engine-1>engine-8": { at: "2026-12-01T11:59:00.000Z" },
    });
    expect(pairSection(render(state))).toEqual([
      "KV transfer (prefill → decode): 16 pairs, all proven for the engines running now, the oldest proof 10m ago (`narwhal status ENGINE` lists an engine's)",
    ]);
    expect(pairSection(render(fleet({}, true, names.slice(0, 2))))).toEqual([
      "KV transfer (prefill → decode): 1 pair, proven for the engines running now 5m ago",
    ]);
  });

  it("lists each pair of running engines that is not proven now, a failure with its cause, below the count", () => {
    const state = fleet({
      "engine-3>engine-4": { passed: false, cause: "transfer-failed", message: "0 of 137 tokens arrived", failures: 1 },
      "engine-5>engine-2": { decode: { ...end("engine-2"), launch_token: "t-old" } }, // the decode restarted since
      "engine-7>engine-8": { at: "2026-12-01T10:00:00.000Z", passed: false, cause: "expired", message: "x" },
    });
    expect(pairSection(render(state))).toEqual([
      "KV transfer (prefill → decode): 16 pairs: 13 proven for the engines running now; not proven now:",
      "  engine-3 → engine-4  FAILED (transfer-failed) 5m ago: 0 of 137 tokens arrived",
      "  engine-5 → engine-2  not proven for the engines running now (last proven 5m ago)",
      "  engine-7 → engine-8  FAILED (expired) 2h ago: x",
    ]);
  });

  it("counts the pairs of engines that do not run (a fleet brought down keeps its proofs), without a line each", () => {
    expect(pairSection(render(fleet({}, false)))).toEqual([
      "KV transfer (prefill → decode): 16 pairs: 0 proven for the engines running now, 16 of engines not running now (`narwhal status ENGINE` lists an engine's)",
    ]);
    // one engine gone from a running fleet: its four pairs are counted, a failure between running engines listed
    const state = fleet({ "engine-3>engine-4": { passed: false, cause: "transfer-failed", message: "m" } });
    delete state.engines["engine-1"];
    expect(pairSection(render(state))).toEqual([
      "KV transfer (prefill → decode): 16 pairs: 11 proven for the engines running now, 4 of engines not running now (`narwhal status ENGINE` lists an engine's); not proven now:",
      "  engine-3 → engine-4  FAILED (transfer-failed) 5m ago: m",
    ]);
  });

  it("lists every pair of one engine in status ENGINE", () => {
    const text = renderStatusText(statusView(fleet(), { controller: free, engine: "engine-2" }), true, NOW);
    expect(pairSection(text).slice(0, 7)).toEqual([
      "KV transfer (prefill → decode):",
      "  engine-1 → engine-2  proven 5m ago",
      "  engine-3 → engine-2  proven 5m ago",
      "  engine-5 → engine-2  proven 5m ago",
      "  engine-7 → engine-2  proven 5m ago",
      "",
      "engine-2:",
    ]);
  });
});
