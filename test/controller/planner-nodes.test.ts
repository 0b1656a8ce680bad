// Issue 10 item 4 as planner tables: an engine whose node cannot be used
// (observed "unknown" with the node's fault, or failed on it) is never acted on
// by guess and blocks only itself and its P/D unit partner; the other nodes'
// engines roll on, and no rollout is halted by a node outage.
import { describe, expect, it } from "vitest";
import { plan } from "../../src/controller/planner.js";
import { DEFAULT_ROLLOUT } from "../../src/desired/rollout-policy.js";
import type { NodeFault } from "../../src/errors.js";
import type { Action, DesiredEngine, ObservedEngine, Plan, RolloutPolicy } from "../../src/controller/plan-types.js";
import {
  captured,
  compatibleEdit,
  desiredFor,
  desiredOf,
  fleetSpecs,
  incompatibleEdit,
  observedOf,
  RUNNING,
} from "./plan-fixtures.js";

const fault: NodeFault = {
  node: "node-b",
  reason: "unreachable",
  message: "node node-b: cannot reach root@10.99.0.2 port 22 (Connection refused)",
};
const NODE_B = `node node-b cannot be reached (${fault.message})`;
const replaced = (p: Plan) => p.actions.filter((a) => a.kind === "replace").map((a) => a.engine);
const waitOf = (p: Plan, engine: string) =>
  p.actions.find((a): a is Extract<Action, { kind: "wait" }> => a.kind === "wait" && a.engine === engine);
const kindsOf = (p: Plan, engine: string) => p.actions.filter((a) => a.engine === engine).map((a) => a.kind);
/** Captured, and its node does not answer: liveness cannot be observed. */
const unseen = (o: ObservedEngine): ObservedEngine => ({ ...o, liveness: "unknown", node_fault: fault });
/** Its last step failed on its node (outwaited): not serving, no engine known to run. */
const failedOnNode = (o: ObservedEngine): ObservedEngine => ({
  ...o,
  phase: "failed",
  handle: null,
  liveness: null,
  running_hash: null,
  node_fault: fault,
});
const policy = (over: Partial<RolloutPolicy>): RolloutPolicy => ({ ...DEFAULT_ROLLOUT, ...over });

// engine-1, engine-2: prefill; engine-3, engine-4: decode; engine-4 lives on node-b.
const specs = fleetSpecs(2, 2);
const old = specs.map(desiredOf);
/** The converged fleet, engine-4's node not answering. */
const nodeBUnseen = () => observedOf([...old.slice(0, 3).map((d) => captured(d)), unseen(captured(old[3]!))]);

describe("an engine on a node that cannot be used, with nothing to change", () => {
  it("is neither restarted nor treated as lost, waits for observation naming its node, and stays listed as it was", () => {
    const p = plan(desiredFor(old), nodeBUnseen(), RUNNING);
    expect(kindsOf(p, "engine-4")).toEqual(["wait"]);
    expect(waitOf(p, "engine-4")).toEqual({
      kind: "wait",
      engine: "engine-4",
      until: "observation",
      why: `cannot observe its engine now: ${NODE_B}; nothing is done on a guess until it answers`,
    });
    expect(p.actions.filter((a) => a.kind !== "wait")).toEqual([]);
    // Not known to be down: the serving fleet is not changed on a guess either.
    expect(p.serving.engines.map((e) => e.engine)).toEqual(["engine-1", "engine-2", "engine-3", "engine-4"]);
  });

  it("not desired any more: its removal waits until it can be observed", () => {
    const p = plan(desiredFor(old.slice(0, 3)), nodeBUnseen(), RUNNING);
    expect(kindsOf(p, "engine-4")).toEqual(["wait"]);
    expect(waitOf(p, "engine-4")?.until).toBe("observation");
  });
});

describe("a compatible rollout while one node cannot be used", () => {
  const next = specs.map((s) => desiredOf(compatibleEdit(s)));

  it("rolls the other nodes' engines; the unobservable engine counts as serving and waits for observation", () => {
    const o = nodeBUnseen();
    const p = plan(desiredFor(next), o, RUNNING);
    expect(replaced(p)).toEqual(["engine-1", "engine-3"]);
    expect(waitOf(p, "engine-4")?.until).toBe("observation");
    expect(p.rollout).toEqual([
      { engines: ["engine-1"], incompatible: false, status: "now" },
      { engines: ["engine-3"], incompatible: false, status: "now" },
      { engines: ["engine-2"], incompatible: false, status: "later" },
      { engines: ["engine-4"], incompatible: false, status: "later" },
    ]);
  });

  it("an engine failed on its node at its desired inputs halts nothing, and where it costs availability the wait names the node", () => {
    const o = observedOf([...old.slice(0, 3).map((d) => captured(d)), failedOnNode(captured(next[3]!))]);
    const p = plan(desiredFor(next), o, RUNNING);
    expect(p.halted).toEqual([]);
    expect(p.rollout.some((s) => s.status === "halted")).toBe(false);
    expect(replaced(p)).toEqual(["engine-1"]);
    // Out of service all the same: taking a second decode engine out would deepen the outage (max_unavailable 1).
    expect(waitOf(p, "engine-3")?.why).toBe(
      `rollout: 1 of 1 decode engines allowed out of service is engine-4, failed (${NODE_B})`,
    );
  });

  it("the same engine failing for another cause (not its node) still halts the rollout", () => {
    const other = { ...failedOnNode(captured(next[3]!)), node_fault: null };
    const p = plan(desiredFor(next), observedOf([...old.slice(0, 3).map((d) => captured(d)), other]), RUNNING);
    expect(p.halted.map((h) => h.engine)).toEqual(["engine-4"]);
    expect(replaced(p)).toEqual([]);
  });
});

describe("an incompatible (P/D unit) rollout while one node cannot be used", () => {
  const next = specs.map((s) => desiredOf(incompatibleEdit(s)));

  it("moves the units of the other nodes; the unobservable engine's partner waits for it, not moving without it", () => {
    const o = nodeBUnseen();
    const p = plan(desiredFor(next), o, RUNNING);
    expect(replaced(p)).toEqual(["engine-1", "engine-3"]);
    expect(p.rollout).toEqual([
      { engines: ["engine-1", "engine-3"], incompatible: true, status: "now" },
      { engines: ["engine-2", "engine-4"], incompatible: true, status: "later" },
    ]);
    expect(waitOf(p, "engine-4")?.until).toBe("observation");
    expect(waitOf(p, "engine-2")).toEqual({
      kind: "wait",
      engine: "engine-2",
      until: "rollout",
      why: `rollout: its P/D unit moves together, and engine-4 waits: cannot observe its engine now: ${NODE_B}; nothing is done on a guess until it answers`,
    });
    // Once the first unit is captured at the new inputs, the partner still waits for the engine on node-b.
    const later = observedOf([captured(next[0]!), captured(old[1]!), captured(next[2]!), unseen(captured(old[3]!))]);
    const q = plan(desiredFor(next), later, RUNNING);
    expect(replaced(q)).toEqual([]);
    expect(waitOf(q, "engine-2")?.until).toBe("rollout");
    // When node-b answers again, the unit moves together.
    const back = observedOf([captured(next[0]!), captured(old[1]!), captured(next[2]!), captured(old[3]!)]);
    expect(replaced(plan(desiredFor(next), back, RUNNING))).toEqual(["engine-2", "engine-4"]);
  });

  it('"recreate" releases every other engine at once; the unobservable one waits for observation', () => {
    const o = nodeBUnseen();
    const p = plan(desiredFor(next, policy({ incompatible: "recreate" })), o, RUNNING);
    expect(replaced(p)).toEqual(["engine-1", "engine-2", "engine-3"]);
    expect(kindsOf(p, "engine-4")).toEqual(["wait"]);
    expect(p.rollout).toEqual([
      { engines: ["engine-1", "engine-2", "engine-3"], incompatible: true, status: "now" },
      { engines: ["engine-4"], incompatible: true, status: "later" },
    ]);
  });
});

describe("an engine with no record on a node whose engines cannot be listed", () => {
  /** The desired engine, placed on node `node` (the planner reads the node from its inputs). */
  const on = (d: DesiredEngine, node: string): DesiredEngine => ({
    ...d,
    inputs: { ...d.inputs, node: { ...(d.inputs["node"] as object), name: node } },
  });

  it("is not created on a guess (an engine of it may run there); one on a node that was listed is", () => {
    const desired = [old[0]!, old[1]!, on(old[2]!, "node-a"), on(old[3]!, "node-b")];
    const p = plan(
      desiredFor(desired),
      observedOf(
        old.slice(0, 2).map((d) => captured(d)),
        { unlisted: [fault] },
      ),
      RUNNING,
    );
    expect(p.actions.filter((a) => a.kind === "create").map((a) => a.engine)).toEqual(["engine-3"]);
    expect(waitOf(p, "engine-4")).toEqual({
      kind: "wait",
      engine: "engine-4",
      until: "observation",
      why: `not created on a guess: what runs on its node cannot be listed (${NODE_B}), and an engine of it may run there`,
    });
    // Once node-b is listed again, it is created (or adopted at a controller start).
    const q = plan(desiredFor(desired), observedOf(old.slice(0, 2).map((d) => captured(d))), RUNNING);
    expect(q.actions.filter((a) => a.kind === "create").map((a) => a.engine)).toEqual(["engine-3", "engine-4"]);
  });
});
