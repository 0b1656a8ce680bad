// The pure retention decision (src/state/retention.ts) on state fixtures: the
// newest K stay, and older runs stay only while the state points to them.
import { describe, expect, it } from "vitest";
import { decideRetention, proofRunDirs } from "../../src/state/retention.js";
import { record, stateFile } from "../controller/records.js";

const ROOT = "/state/runs/engine-1";
const run = (minute: number, suffix = "") => `20260101T00${String(minute).padStart(2, "0")}00Z-abcdef12${suffix}`;
const at = (name: string) => `${ROOT}/${name}`;
const kept = (r: ReturnType<typeof decideRetention>) => r.runs.filter((v) => v.keep).map((v) => v.name);
const removed = (r: ReturnType<typeof decideRetention>) => r.runs.filter((v) => !v.keep).map((v) => v.name);
const RUNS = [run(1), run(2), run(3), run(4), run(5), run(6)];

describe("decideRetention", () => {
  it("keeps the newest K (newest first, a retry suffix newer than its base) and removes the rest", () => {
    const entries = [run(3), run(1), run(2), run(2, "-2"), run(2, "-10")];
    const r = decideRetention("engine-1", ROOT, entries, 2, stateFile([record("engine-1", { run_dir: null, handle: null, snapshot: null })]));
    expect(kept(r)).toEqual([run(3), run(2, "-10")]);
    expect(removed(r)).toEqual([run(2, "-2"), run(2), run(1)]);
  });

  it("never removes the run the engine serves from, however old", () => {
    const r = decideRetention("engine-1", ROOT, RUNS, 2, stateFile([record("engine-1", { run_dir: at(run(1)) })]));
    expect(kept(r)).toEqual([run(6), run(5), run(1)]);
    expect(r.runs.find((v) => v.name === run(1))?.keep).toEqual({ reason: "referenced", why: "the engine's current plan (run_dir)" });
  });

  it("keeps the run the machine is preparing or starting in, and the retiring engine's run", () => {
    const snapshot = { value: "starting", context: { run: { dir: at(run(2)) }, retiring: { run_dir: at(run(3)) } } };
    const r = decideRetention("engine-1", ROOT, RUNS, 1, stateFile([record("engine-1", { run_dir: null, snapshot })]));
    expect(kept(r)).toEqual([run(6), run(3), run(2)]);
  });

  it("keeps the run the last error points to (a failed start's evidence and kept container)", () => {
    const last_error = {
      name: "PhaseError",
      message: `container 0123456789ab is kept, stopped, as narwhal-engine-1-failed-0123456789ab; its state is in ${at(run(2))}/start-failure.json`,
      retryable: false,
    };
    const r = decideRetention("engine-1", ROOT, RUNS, 1, stateFile([record("engine-1", { run_dir: null, handle: null, snapshot: null, last_error })]));
    expect(kept(r)).toEqual([run(6), run(2)]);
  });

  it("keeps a run a KV-transfer proof names", () => {
    const state = stateFile([record("engine-1", { run_dir: null, snapshot: null })]);
    const end = (engine: string, dir: string) => ({ engine, launch_token: "t", run_dir: dir, node: null });
    const proof = { prefill: end("engine-1", at(run(1))), decode: end("engine-2", "/state/runs/engine-2/x"), passed: true, cause: null, message: "ok", at: "", source: "proof" as const, failures: 0 };
    const r = decideRetention("engine-1", ROOT, RUNS, 1, { ...state, proofs: { "engine-1>engine-2": proof } });
    expect(kept(r)).toEqual([run(6), run(1)]);
  });

  it("keeps a run whose file a KV-transfer proof names, and not a run whose name only starts the same", () => {
    const state = stateFile([record("engine-1", { run_dir: null, snapshot: null })]);
    const end = (engine: string, dir: string) => ({ engine, launch_token: "t", run_dir: dir, node: null });
    const proof = (prefillDir: string) => ({ prefill: end("engine-1", prefillDir), decode: end("engine-2", "/state/runs/engine-2/x"), passed: true, cause: null, message: "ok", at: "", source: "proof" as const, failures: 0 });
    const entries = [run(6), run(2), run(1), run(1, "-2")];
    const proofs = { "engine-1>engine-2": proof(`${at(run(2))}/kv-transfer.json`), "engine-1>engine-3": proof(at(run(1, "-2"))) };
    const r = decideRetention("engine-1", ROOT, entries, 1, { ...state, proofs });
    expect(kept(r)).toEqual([run(6), run(2), run(1, "-2")]);
    expect(removed(r)).toEqual([run(1)]);
    // The set a caller computes once for every engine decides the same.
    expect(decideRetention("engine-1", ROOT, entries, 1, { ...state, proofs }, proofRunDirs(proofs))).toEqual(r);
  });

  it("does not take a longer run name for the one referenced (…-abcdef12 is not …-abcdef12-2)", () => {
    const entries = [run(5), run(1), run(1, "-2")];
    const r = decideRetention("engine-1", ROOT, entries, 1, stateFile([record("engine-1", { run_dir: at(run(1, "-2")) })]));
    expect(removed(r)).toEqual([run(1)]);
  });

  it("counts history as no pointer, and leaves what narwhal did not make alone", () => {
    const history = [{ at: "", from: "a", to: "b", note: `from ${at(run(1))}` }];
    const entries = [...RUNS, "notes.txt", ".20260101T000700Z-abcdef12.partial"];
    const r = decideRetention("engine-1", ROOT, entries, 1, stateFile([record("engine-1", { run_dir: null, snapshot: null, history })]));
    expect(removed(r)).toContain(run(1));
    expect(r.foreign).toEqual(["notes.txt"]);
    expect(r.runs.map((v) => v.name)).not.toContain(".20260101T000700Z-abcdef12.partial");
  });

  it("keeps everything referenced with K = 0, and an engine the state does not know keeps only K", () => {
    expect(kept(decideRetention("engine-1", ROOT, RUNS, 0, stateFile([record("engine-1", { run_dir: at(run(4)) })])))).toEqual([run(4)]);
    expect(kept(decideRetention("engine-1", ROOT, RUNS, 3, stateFile([])))).toEqual([run(6), run(5), run(4)]);
  });
});
