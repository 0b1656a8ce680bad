// The live view of a reconcile as data: each engine's step, since when, and what
// it waits for; and the one-line summary after --once.
import { describe, expect, it } from "vitest";
import {
  applyProgress,
  convergedSummary,
  elapsedWords,
  progressLines,
  type ProgressBoard,
} from "../../src/cli/progress-view.js";
import { kvProofWait } from "../../src/controller/observer.js";

const T0 = Date.parse("2026-12-02T01:00:00.000Z");

describe("progress view", () => {
  it("shows an engine from its step's beginning to its end, with what the step awaits", () => {
    let board: ProgressBoard = new Map();
    board = applyProgress(board, "engine-b", { kind: "begin", step: "check" }, T0);
    board = applyProgress(board, "engine-a", { kind: "begin", step: "start" }, T0);
    board = applyProgress(
      board,
      "engine-a",
      { kind: "wait", step: "start", wait: { awaiting: "http://h:1/health to answer 200", limitMs: 180_000 } },
      T0 + 2_000,
    );
    expect(progressLines(board, T0 + 14_000)).toEqual([
      "engine-a  start     14 s  waiting for http://h:1/health to answer 200, 12 s of 180",
      "engine-b  check     14 s",
    ]);
    board = applyProgress(board, "engine-a", { kind: "end", step: "start", seconds: 15 }, T0 + 15_000);
    expect(progressLines(board, T0 + 15_000)).toEqual(["engine-b  check     15 s"]);
    // A new step starts with nothing awaited yet.
    board = applyProgress(board, "engine-b", { kind: "begin", step: "start" }, T0 + 16_000);
    expect(progressLines(board, T0 + 17_000)).toEqual(["engine-b  start     1 s"]);
  });

  it("says a wait without a bound of its own without 'of'", () => {
    const board = applyProgress(
      new Map(),
      "e",
      { kind: "wait", step: "inspect", wait: { awaiting: "the checkpoint's manifest", limitMs: null } },
      T0,
    );
    expect(progressLines(board, T0 + 3_000)).toEqual(["e  inspect   3 s  waiting for the checkpoint's manifest, 3 s"]);
  });

  it("continues a wait whose step says how far it has come; a new awaited condition starts its own time", () => {
    const hashing = (sofar: string) => ({
      kind: "wait" as const,
      step: "inspect" as const,
      wait: { awaiting: "the manifest of /models/x", limitMs: null, sofar },
    });
    let board = applyProgress(new Map(), "e", { kind: "begin", step: "inspect" }, T0);
    board = applyProgress(board, "e", hashing("0.0 of 40.0 GiB hashed, 0 of 7 files"), T0 + 1_000);
    board = applyProgress(board, "e", hashing("12.1 of 40.0 GiB hashed, 3 of 7 files"), T0 + 9_000);
    expect(progressLines(board, T0 + 10_000)).toEqual([
      "e  inspect   10 s  waiting for the manifest of /models/x, 9 s: 12.1 of 40.0 GiB hashed, 3 of 7 files",
    ]);
    board = applyProgress(
      board,
      "e",
      { kind: "wait", step: "inspect", wait: { awaiting: "x", limitMs: 5_000 } },
      T0 + 10_000,
    );
    expect(progressLines(board, T0 + 12_000)).toEqual(["e  inspect   12 s  waiting for x, 2 s of 5"]);
  });

  it("shows a KV-transfer proof on its decode's line", () => {
    let board = applyProgress(new Map(), "decode-1", { kind: "begin", step: "kv-proof" }, T0);
    const wait = kvProofWait("prefill-1", "decode-1", 60_000);
    board = applyProgress(board, "decode-1", { kind: "wait", step: "kv-proof", wait }, T0);
    expect(progressLines(board, T0 + 3_000)).toEqual([
      "decode-1  kv-proof  3 s  waiting for a KV transfer prefill-1 → decode-1 to be proven, 3 s of 60",
    ]);
  });

  it("words elapsed time as an operator reads it", () => {
    expect(elapsedWords(-5)).toBe("0 s");
    expect(elapsedWords(59_999)).toBe("59 s");
    expect(elapsedWords(125_000)).toBe("2 min 5 s");
    expect(elapsedWords(3_780_000)).toBe("1 h 3 min");
  });

  it("sums up a --once run: how long, and how many desired engines are captured", () => {
    const desired = { specs: [{ name: "a" }, { name: "b" }] };
    const state = { engines: { a: { phase: "captured" }, b: { phase: "failed" }, gone: { phase: "captured" } } };
    expect(convergedSummary(state, desired, 42_000, false)).toBe("not converged after 42 s: 1 of 2 engines captured");
    const both = { engines: { a: { phase: "captured" }, b: { phase: "captured" } } };
    expect(convergedSummary(both, desired, 61_000, true)).toBe("converged in 1 min 1 s: 2 of 2 engines captured");
    expect(convergedSummary(both, { specs: [{ name: "a" }] }, 1_000, true)).toBe(
      "converged in 1 s: 1 of 1 engine captured",
    );
  });
});
