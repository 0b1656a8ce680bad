// The planner's suspension rules (issue 13 item 2): a suspended engine is
// observed but never changed, and its P/D partner is neither proven nor
// restarted through it; each case starts from a converged P/D fleet and changes
// exactly what it reads. `narwhal retry` gives a terminal failure a fresh
// attempt while the controller runs.
import { describe, expect, it } from "vitest";
import { plan } from "../../src/controller/planner.js";
import { pairKey, type Action, type Observed, type ObservedEngine } from "../../src/controller/plan-types.js";
import { DEFAULT_KV } from "../../src/desired/kv-policy.js";
import { DEFAULT_ROLLOUT } from "../../src/desired/rollout-policy.js";
import {
  captured,
  compatibleEdit,
  desiredFor,
  desiredOf,
  fleetSpecs,
  observedOf,
  owned,
  proofOf,
  RUNNING,
  STARTUP,
} from "./plan-fixtures.js";

const kinds = (actions: Action[]) => actions.map((a) => `${a.kind}${"until" in a ? `(${a.until})` : ""} ${a.engine}`);
const SINCE = "2026-12-01T11:00:00.000Z";

describe("plan: a suspended engine", () => {
  const specs = fleetSpecs(1, 1);
  const [d1, d2] = specs.map(desiredOf) as [ReturnType<typeof desiredOf>, ReturnType<typeof desiredOf>];
  const [p, d] = [captured(d1), captured(d2)];
  const suspended = (...names: string[]) => Object.fromEntries(names.map((n) => [n, SINCE]));
  const run = (os: ObservedEngine[], over: Partial<Observed>, desired = [d1, d2], policy = RUNNING) =>
    plan(desiredFor(desired, DEFAULT_ROLLOUT, DEFAULT_KV), observedOf(os, over), policy);

  it("is not replaced when its inputs change: the plan waits on it, naming the held change", () => {
    const edited = desiredOf(compatibleEdit(specs[0]!));
    const free = run([p, d], {}, [edited, d2]);
    expect(kinds(free.actions)).toContain("replace engine-1");
    const out = run([p, d], { suspended: suspended("engine-1") }, [edited, d2]);
    expect(kinds(out.actions)).toEqual(["wait(suspended) engine-1"]);
    const wait = out.actions[0] as Extract<Action, { kind: "wait" }>;
    expect(wait.why).toContain(`suspended since ${SINCE}: observed, never changed (narwhal resume engine-1)`);
    expect(wait.why).toContain(`held: replace (inputs ${d1.input_hash.slice(0, 8)} → ${edited.input_hash.slice(0, 8)}`);
    expect(out.rollout).toEqual([]);
    expect(out.changes).toBe(false);
  });

  it("is neither restarted when lost nor removed when it leaves desired/, nor its orphan swept", () => {
    const gone = { ...p, liveness: "gone" as const };
    expect(kinds(run([gone, d], {}).actions)).toContain("restart-lost engine-1");
    expect(kinds(run([gone, d], { suspended: suspended("engine-1") }).actions)).toEqual(["wait(suspended) engine-1"]);
    expect(kinds(run([p, d], {}, [d2]).actions)).toContain("remove engine-1");
    expect(kinds(run([p, d], { suspended: suspended("engine-1") }, [d2]).actions)).toEqual([
      "wait(suspended) engine-1",
    ]);
    const orphan = owned("engine-1", "tok-stray");
    expect(kinds(run([p, d], { owned: [orphan] }).actions)).toContain("sweep-orphan engine-1");
    const held = run([p, d], { owned: [orphan], suspended: suspended("engine-1") });
    expect(kinds(held.actions)).toEqual(["wait(suspended) engine-1"]);
    expect((held.actions[0] as Extract<Action, { kind: "wait" }>).why).toContain(
      "stopping an orphan (launch token tok-stra)",
    );
  });

  it("is not created or adopted at startup while suspended", () => {
    expect(kinds(run([d], { suspended: suspended("engine-1") }).actions)).toEqual(["wait(suspended) engine-1"]);
    const adoptable = owned("engine-1", "tok-x", { input_hash: d1.input_hash });
    expect(kinds(run([d], { owned: [adoptable] }, [d1, d2], STARTUP).actions)).toContain("adopt engine-1");
    expect(
      kinds(run([d], { owned: [adoptable], suspended: suspended("engine-1") }, [d1, d2], STARTUP).actions),
    ).toEqual(["wait(suspended) engine-1"]);
  });

  it("its P/D partner is neither proven with it nor restarted through it", () => {
    // Never proven: the pair would be proven; with either end suspended it is not.
    expect(kinds(run([p, d], { proofs: {} }).actions)).toEqual(["prove engine-2"]);
    expect(kinds(run([p, d], { proofs: {}, suspended: suspended("engine-1") }).actions)).toEqual([
      "wait(suspended) engine-1",
    ]);
    expect(kinds(run([p, d], { proofs: {}, suspended: suspended("engine-2") }).actions)).toEqual([
      "wait(suspended) engine-2",
    ]);
    // A failed proof restarts the decode; a suspended prefill holds that restart.
    const failed = {
      [pairKey("engine-1", "engine-2")]: {
        ...proofOf(p, d),
        passed: false,
        cause: "transfer-failed" as const,
        failures: 1,
      },
    };
    expect(kinds(run([p, d], { proofs: failed }).actions)).toContain("restart-unproven engine-2");
    const held = run([p, d], { proofs: failed, suspended: suspended("engine-1") });
    expect(kinds(held.actions)).toEqual(["wait(suspended) engine-1"]);
    expect((held.actions[0] as Extract<Action, { kind: "wait" }>).why).toContain(
      "restarting engine-2 (pair with engine-1 not proven)",
    );
  });

  it("resumed (no longer in the observation), it converges as before", () => {
    const edited = desiredOf(compatibleEdit(specs[0]!));
    expect(run([p, d], { suspended: {} }, [edited, d2]).actions.map((a) => a.kind)).toContain("replace");
  });
});

describe("plan: narwhal retry", () => {
  const [d1, d2] = fleetSpecs(1, 1).map(desiredOf) as [ReturnType<typeof desiredOf>, ReturnType<typeof desiredOf>];
  const failed = captured(d1, { phase: "failed", terminal: true, handle: null, liveness: null, running_hash: null });
  const run = (e: ObservedEngine, suspended?: Record<string, string>) =>
    plan(desiredFor([d1, d2]), observedOf([e, captured(d2)], suspended ? { suspended } : {}), RUNNING);

  it("retries a terminal failure of a running controller's engine only when asked", () => {
    expect(kinds(run(failed).actions)).not.toContain("retry engine-1");
    const out = run({ ...failed, retry_requested: true });
    expect(out.actions.find((a) => a.kind === "retry")).toEqual({
      kind: "retry",
      engine: "engine-1",
      reason: "failed with no attempts left; narwhal retry gives it a fresh attempt budget",
    });
    // Not terminal (a backoff under way): nothing to retry.
    expect(kinds(run({ ...failed, terminal: false, retry_requested: true }).actions)).not.toContain("retry engine-1");
    // Suspended: held like every other change.
    expect(kinds(run({ ...failed, retry_requested: true }, { "engine-1": SINCE }).actions)).toContain(
      "wait(suspended) engine-1",
    );
  });
});
