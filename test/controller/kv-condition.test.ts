// KVTransfer from the latest proofs and the plan that follows them: each row
// builds an observation as data and reads the verdict an operator would see.
import { describe, expect, it } from "vitest";
import { kvVerdicts } from "../../src/controller/kv-condition.js";
import { proofIsCurrent } from "../../src/controller/kv-pairs.js";
import type { Action, ObservedProof, Plan } from "../../src/controller/plan-types.js";
import { captured, desiredOf, handleOf, observedOf, specOf } from "./plan-fixtures.js";

const [p, d] = [desiredOf(specOf(1, "prefill")), desiredOf(specOf(2, "decode"))];

function proof(over: Partial<ObservedProof> = {}): ObservedProof {
  return {
    prefill: { engine: "engine-1", launch_token: "tok-engine-1", run_dir: "/r/1", node: null },
    decode: { engine: "engine-2", launch_token: "tok-engine-2", run_dir: "/r/2", node: null },
    passed: true,
    cause: null,
    message: "KV moved: 40 tokens, 81920 bytes",
    at: "2026-12-01T12:00:00.000Z",
    source: "proof",
    failures: 0,
    ...over,
  };
}

const planOf = (actions: Action[] = []): Plan => ({
  actions,
  rollout: [],
  halted: [],
  serving: { group_signature: null, engines: [], pairs: [] },
  warnings: [],
  changes: actions.length > 0,
});

describe("KVTransfer verdicts", () => {
  it("names up to eight peers and counts more: a prefill of one model's 500 decodes keeps a short condition", () => {
    const decodes = (n: number) => Array.from({ length: n }, (_, i) => desiredOf(specOf(2 * i + 2, "decode")));
    const verdict = (n: number) => {
      const proofs = Object.fromEntries(
        decodes(n).map((x) => [
          `engine-1>${x.engine}`,
          proof({ decode: { engine: x.engine, launch_token: `tok-${x.engine}`, run_dir: "/r", node: null } }),
        ]),
      );
      return kvVerdicts(observedOf([captured(p), ...decodes(n).map((x) => captured(x))], { proofs }), planOf());
    };
    expect(verdict(8).get("engine-1")?.message).toBe(
      "KV moves to engine-2, engine-4, engine-6, engine-8, engine-10, engine-12, engine-14, engine-16 (proven at 2026-12-01T12:00:00.000Z)",
    );
    expect(verdict(500).get("engine-1")?.message).toBe(
      "KV moves to 500 decodes: engine-2, engine-4, engine-6 and 497 more (proven at 2026-12-01T12:00:00.000Z)",
    );
    expect(verdict(500).get("engine-2")?.message).toBe("KV moves from engine-1 (proven at 2026-12-01T12:00:00.000Z)");
  });

  it("True on both ends of a current passed proof, naming the peer", () => {
    const v = kvVerdicts(
      observedOf([captured(p), captured(d)], { proofs: { "engine-1>engine-2": proof() } }),
      planOf(),
    );
    expect(v.get("engine-1")).toMatchObject({
      status: true,
      reason: "Proven",
      message: expect.stringMatching(/to engine-2/),
    });
    expect(v.get("engine-2")).toMatchObject({
      status: true,
      reason: "Proven",
      message: expect.stringMatching(/from engine-1/),
    });
  });

  it("a failed proof names its cause on both ends, and what the plan does next", () => {
    const failed = proof({ passed: false, cause: "silent-recompute", message: "external_kv_transfer +0", failures: 1 });
    const restart: Action = {
      kind: "restart-unproven",
      engine: "engine-2",
      prefill: "engine-1",
      reason: "restarting the decode",
    };
    const v = kvVerdicts(
      observedOf([captured(p), captured(d)], { proofs: { "engine-1>engine-2": failed } }),
      planOf([restart]),
    );
    for (const e of ["engine-1", "engine-2"])
      expect(v.get(e)).toMatchObject({
        status: false,
        reason: "SilentRecompute",
        message: "engine-1 → engine-2: external_kv_transfer +0; next: restarting the decode",
      });
  });

  it("a proof of an instance that no longer runs is not current: Proving while the plan proves again, NoPeer without a plan", () => {
    const restarted = captured(p, { handle: handleOf("engine-1", "tok-new") });
    const o = observedOf([restarted, captured(d)], { proofs: { "engine-1>engine-2": proof() } });
    expect(proofIsCurrent(proof(), o)).toBe(false);
    const prove: Action = {
      kind: "prove",
      engine: "engine-2",
      prefill: "engine-1",
      reason: "the prefill engine-1 restarted",
    };
    expect(kvVerdicts(o, planOf([prove])).get("engine-2")).toMatchObject({ status: false, reason: "Proving" });
    expect(kvVerdicts(o, planOf()).get("engine-1")).toMatchObject({ status: false, reason: "NoPeer" });
  });

  it("an engine that is not captured is NotServing; other roles get no verdict", () => {
    const embed = desiredOf(specOf(3, "embed"));
    const v = kvVerdicts(
      observedOf([captured(p), captured(d, { phase: "started" }), captured(embed)], {
        proofs: { "engine-1>engine-2": proof() },
      }),
      planOf(),
    );
    expect(v.get("engine-2")).toMatchObject({ status: false, reason: "NotServing" });
    expect(v.has("engine-3")).toBe(false);
  });
});
