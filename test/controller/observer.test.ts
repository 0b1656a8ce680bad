// The controller's one observer channel: its subscribers (watch mode's metrics,
// the live view) each hear what they implement from one call; and a KV proof
// is told as a step of its decode (begin, what it awaits, end) and as a result.
import { describe, expect, it } from "vitest";
import { fanOut, observedKv, type ObserverSubscriber } from "../../src/controller/observer.js";
import type { KvIo } from "../../src/controller/kv-proofs.js";
import type { StepProgress } from "../../src/phases/progress.js";
import type { KvProofResult, ProofEnd } from "../../src/phases/kv-proof.js";

const end = (engine: string): ProofEnd => ({ engine, run_dir: `/runs/${engine}`, launch_token: "t", node: null });

function recorder() {
  const heard: string[] = [];
  const steps: Array<[string, StepProgress]> = [];
  const sub: ObserverSubscriber = {
    step: (engine, p) => steps.push([engine, p]),
    kvProof: (result) => heard.push(`proof ${result}`),
  };
  return { heard, steps, sub };
}

describe("controller observer", () => {
  it("fans one call out to every subscriber, each hearing only what it implements; none: no observer", () => {
    const a = recorder();
    const transitions: string[] = [];
    const observer = fanOut(a.sub, undefined, { transition: (e, from, to) => transitions.push(`${e} ${from}→${to}`) });
    observer!.transition("e", "pending", "inspected");
    observer!.step("e", { kind: "begin", step: "inspect" });
    observer!.reconciled("fleet", 0.1, true);
    observer!.stateWritten(0.01, true);
    expect(transitions).toEqual(["e pending→inspected"]);
    expect(a.steps).toEqual([["e", { kind: "begin", step: "inspect" }]]);
    expect(fanOut(undefined, null)).toBeUndefined();
  });

  it("tells a proof as its decode's step, with what it awaits, and its result", async () => {
    const result: KvProofResult = {
      passed: false,
      cause: "transfer-failed",
      message: "m",
      checks: [],
      at: "t",
      evidence: [],
    };
    const io: KvIo = {
      prove: () => Promise.resolve(result),
      scrape: () => Promise.reject(new Error("not scraped here")),
    };
    const r = recorder();
    await observedKv(io, fanOut(r.sub))!.prove(end("prefill-1"), end("decode-1"), { timeoutMs: 60_000 });
    expect(r.steps.map(([engine, p]) => `${engine} ${p.kind} ${p.step}`)).toEqual([
      "decode-1 begin kv-proof",
      "decode-1 wait kv-proof",
      "decode-1 end kv-proof",
    ]);
    expect(r.steps[1]![1]).toMatchObject({
      wait: { awaiting: "a KV transfer prefill-1 → decode-1 to be proven", limitMs: 60_000 },
    });
    expect(r.steps[2]![1]).toMatchObject({ failure: { reason: "transfer-failed" } });
    expect(r.heard).toEqual(["proof transfer-failed"]);
  });

  it("ends a proof that throws as a failed request, and rethrows", async () => {
    const io: KvIo = {
      prove: () => Promise.reject(new Error("connection refused")),
      scrape: () => Promise.reject(new Error("not scraped here")),
    };
    const r = recorder();
    const proving = observedKv(io, fanOut(r.sub))!.prove(end("p"), end("d"), { timeoutMs: 1_000 });
    await expect(proving).rejects.toThrow("connection refused");
    expect(r.steps.at(-1)![1]).toMatchObject({ kind: "end", step: "kv-proof", failure: { reason: "request-failed" } });
    expect(r.heard).toEqual(["proof request-failed"]);
  });
});
