// Issue 10 item 4: an engine whose node cannot be used (unreachable, host key,
// key refused) is observed as "unknown" with its node's fault, never acted on;
// the node is told once per observation, not once per engine; and the engine's
// record says NodeReachable=False with the reason until a step or an
// observation on that node succeeds again.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { initialContext, type EngineContext } from "../../machines/engine-context.js";
import { inStep, toErrorRecord, type NodeFault } from "../../src/errors.js";
import { classifySshFailure } from "../../src/hosts/ssh-errors.js";
import type { EngineBackend } from "../../src/backends/types.js";
import type { EngineHandle } from "../../src/phases/types.js";
import type { Logger } from "../../src/log.js";
import { World } from "../../src/controller/world.js";
import { observe, type KnownEngine } from "../../src/controller/observe.js";
import { conditionsFor, recordFrom, withNodeReachable } from "../../src/controller/record.js";
import { markObserved } from "../../src/controller/known-engines.js";
import type { DesiredEngine, Liveness, ObservedEngine, Plan } from "../../src/controller/plan-types.js";
import type { Condition, EngineRecord } from "../../src/state/store.js";
import { openStores } from "../state/open-stores.js";
import { captured, observedOf } from "./plan-fixtures.js";
import { record } from "./records.js";
import { memoryLogger } from "../log/memory-logger.js";

const T0 = "2026-12-01T12:00:00.000Z";
const T1 = "2026-12-01T12:05:00.000Z";
const T2 = "2026-12-01T12:05:10.000Z";
const retry = { baseMs: 1000, capMs: 60_000, maxAttempts: 5 };
const target = (node: string) => ({ node, destination: `root@${node}`, port: 22, knownHostsFile: "/k" });
const REFUSED = "ssh: connect to host node-b port 22: Connection refused";

/** What the controller's logger warned and erred, in order. */
function logger(): Logger & { lines: string[] } {
  const { log, lines } = memoryLogger();
  return Object.defineProperty(log, "lines", {
    get: () => lines.filter((l) => l.level === "warn" || l.level === "error").map((l) => l.message),
  }) as Logger & { lines: string[] };
}

const handle = (n: number, node: string): EngineHandle => ({
  kind: "native",
  pid: 100 + n,
  pgid: 100 + n,
  boot_id: "b",
  start_ticks: 1,
  launch_token: `t${n}`,
  node,
});

/** A native backend over nodes: node-a answers, the nodes in `down` raise what SshHost raises for them. */
function backendOver(down: Map<string, string>, calls: string[] = []): EngineBackend {
  return {
    kind: "native",
    isAlive: async (h: EngineHandle) => {
      const node = h.kind === "native" ? (h.node ?? "local") : "local";
      calls.push(`isAlive ${h.launch_token}`);
      const stderr = down.get(node);
      if (stderr) throw classifySshFailure(stderr, target(node))!;
      return true;
    },
    listOwned: async () => [],
  } as unknown as EngineBackend;
}

const known = (n: number, node: string, phase = "captured", over: Partial<EngineContext> = {}): KnownEngine => ({
  engine: `engine-${n}`,
  phase,
  context: { ...initialContext({ engine: `engine-${n}`, desiredHash: "h", retry }), handle: handle(n, node), ...over },
  record: undefined,
  has_actor: true,
});

const opts = (cache = new Map<string, Liveness>(), faults = new Map<string, NodeFault>()) => ({
  probe: true,
  key: false,
  health: false,
  owned: null,
  cache,
  faults,
  secrets: [],
  serving: null,
});

const stores = openStores();

describe("observing engines on a node that cannot be used", () => {
  it("observes its engines as unknown with the node's fault, tells the node once, and the other node's engines as they are", async () => {
    const log = logger();
    const b = backendOver(new Map([["node-b", REFUSED]]));
    const world = new World({ native: b, container: b }, log, 1000);
    const o = await observe(world, [known(1, "node-a"), known(2, "node-b"), known(3, "node-b")], [], opts());
    expect(o.engines["engine-1"]).toMatchObject({ liveness: "alive", node_fault: null, problem: null });
    for (const e of ["engine-2", "engine-3"]) {
      expect(o.engines[e]).toMatchObject({ liveness: "unknown", problem: null });
      expect(o.engines[e]!.node_fault).toMatchObject({ node: "node-b", reason: "unreachable" });
    }
    expect(log.lines).toHaveLength(1);
    expect(log.lines[0]).toMatch(
      /^node node-b cannot be reached \(node node-b: cannot reach root@node-b port 22 \(ssh: connect to host node-b port 22: Connection refused\)\); its engines engine-2, engine-3 cannot be observed now and are neither restarted nor treated as lost until it answers$/,
    );
  });

  it("names each failing node once, with its reason", async () => {
    const log = logger();
    const b = backendOver(
      new Map([
        ["node-b", "Host key verification failed."],
        ["node-c", "root@node-c: Permission denied (publickey)."],
      ]),
    );
    const world = new World({ native: b, container: b }, log, 1000);
    const o = await observe(world, [known(2, "node-b"), known(3, "node-c"), known(4, "node-c")], [], opts());
    expect(o.engines["engine-2"]!.node_fault?.reason).toBe("host-key");
    expect(o.engines["engine-4"]!.node_fault?.reason).toBe("auth");
    expect(log.lines.map((l) => l.split(" (")[0])).toEqual([
      "node node-b does not present the host key recorded for it",
      "node node-c refuses narwhal's key",
    ]);
  });

  it("keeps the fault behind a cached unknown for a light observation, and tells nothing it did not probe", async () => {
    const log = logger();
    const calls: string[] = [];
    const b = backendOver(new Map([["node-b", REFUSED]]), calls);
    const world = new World({ native: b, container: b }, log, 1000);
    const cache = new Map<string, Liveness>();
    const faults = new Map<string, NodeFault>();
    await observe(world, [known(2, "node-b")], [], opts(cache, faults));
    const light = await observe(world, [known(2, "node-b")], [], { ...opts(cache, faults), probe: false });
    expect(calls).toEqual(["isAlive t2"]);
    expect(light.engines["engine-2"]).toMatchObject({ liveness: "unknown", node_fault: { node: "node-b" } });
    expect(log.lines).toHaveLength(1);
  });

  it("takes a failed step's node fault for an engine it cannot observe otherwise (no handle)", async () => {
    const log = logger();
    const b = backendOver(new Map());
    const world = new World({ native: b, container: b }, log, 1000);
    const error = toErrorRecord(inStep(classifySshFailure(REFUSED, target("node-b")), "engine-5", "inspect"));
    const o = await observe(world, [known(5, "node-b", "failed", { handle: null, error })], [], opts());
    expect(o.engines["engine-5"]).toMatchObject({
      liveness: null,
      node_fault: { node: "node-b", reason: "unreachable" },
    });
  });
});

describe("listing what runs when a node cannot be used", () => {
  it("lists nothing of that backend (so nothing is swept), names the node, and the observation says it is unlisted", async () => {
    const log = logger();
    let down = true;
    const failing = {
      ...backendOver(new Map()),
      listOwned: async () => {
        if (down) throw classifySshFailure(REFUSED, target("node-b"))!;
        return [];
      },
    } as EngineBackend;
    const world = new World({ native: failing, container: failing }, log, 1000);
    const owned = await world.listOwned(true);
    expect(owned).toEqual([]);
    expect(log.lines).toEqual([
      expect.stringMatching(
        /^cannot list native engines on node node-b to find orphans \(node node-b: cannot reach .*\); none of them is swept, adopted or created on a guess until it answers$/,
      ),
    ]);
    const o = await observe(world, [], [], { ...opts(), owned });
    expect(o.unlisted).toEqual([expect.objectContaining({ node: "node-b", reason: "unreachable" })]);
    // The next listing that goes through clears it.
    down = false;
    expect((await observe(world, [], [], { ...opts(), owned: await world.listOwned() })).unlisted).toBeUndefined();
  });
});

describe("NodeReachable", () => {
  const fault = (reason: NodeFault["reason"]): NodeFault => ({
    node: "node-b",
    reason,
    message: `node node-b: ${reason}`,
  });
  const nodeCond = (cs: readonly Condition[]) => cs.find((c) => c.type === "NodeReachable");
  const stepError = toErrorRecord(inStep(classifySshFailure(REFUSED, target("node-b")), "engine-2", "probe"));
  const ctx = (over: Partial<EngineContext> = {}): EngineContext => ({
    ...initialContext({ engine: "engine-2", desiredHash: "h", retry }),
    ...over,
  });

  it("is absent while the engine's node never failed it", () => {
    expect(nodeCond(conditionsFor(undefined, "captured", ctx({ runningHash: "h" }), T0))).toBeUndefined();
  });

  it.each([
    ["unreachable", "Unreachable"],
    ["host-key", "HostKeyRejected"],
    ["auth", "AuthFailed"],
  ] as const)("a %s node is False with reason %s and the error's message", (reason, expected) => {
    expect(nodeCond(withNodeReachable([], { fault: fault(reason) }, T0))).toEqual({
      type: "NodeReachable",
      status: "False",
      reason: expected,
      message: `node node-b: ${reason}`,
      lastTransitionTime: T0,
    });
  });

  it("follows the engine's steps: False when one fails on the node, held through the retry, True when one goes through", () => {
    let rec: EngineRecord | undefined;
    const step = (phase: string, over: Partial<EngineContext>, at: string) =>
      (rec = { ...recordFrom(rec, phase, ctx(over), "native", null), updated_at: at });
    step("started", { handle: handle(2, "node-b") }, T0);
    expect(nodeCond(rec!.conditions)).toBeUndefined();
    step("failed", { handle: handle(2, "node-b"), error: stepError }, T0);
    expect(nodeCond(rec!.conditions)).toMatchObject({ status: "False", reason: "Unreachable" });
    expect(nodeCond(rec!.conditions)!.message).toBe(stepError.message);
    // The backoff fired: the probe runs again, which says nothing about the node yet.
    step("started", { handle: handle(2, "node-b"), error: stepError }, T1);
    expect(nodeCond(rec!.conditions)).toMatchObject({ status: "False", reason: "Unreachable" });
    // The probe went through: the node answers.
    step("probed", { handle: handle(2, "node-b"), error: stepError }, T1);
    expect(nodeCond(rec!.conditions)).toMatchObject({
      status: "True",
      reason: "Reachable",
      message: "its node answered again: the step from started to probed went through",
    });
    step("captured", { handle: handle(2, "node-b"), runningHash: "h" }, T1);
    expect(nodeCond(rec!.conditions)).toMatchObject({ status: "True", reason: "Reachable" });
  });

  it("is not made True by a desired change or a removal (no step ran on the node)", () => {
    const failed = withNodeReachable([], { fault: fault("unreachable") }, T0);
    for (const phase of ["pending", "removing"])
      expect(nodeCond(conditionsFor(failed, phase, ctx(), T1, null))!.status, `captured → ${phase}`).toBe("False");
  });

  it("follows observation: False while it fails on the node, True once it answers, the time moving only on a change", () => {
    const down = withNodeReachable([], { fault: fault("unreachable") }, T0);
    const still = withNodeReachable(down, { fault: fault("unreachable") }, T1);
    expect(nodeCond(still)!.lastTransitionTime).toBe(T0);
    const quiet = withNodeReachable(still, null, T1);
    expect(nodeCond(quiet)).toEqual(nodeCond(still));
    const back = withNodeReachable(quiet, { answered: "observed the engine running" }, T1);
    expect(nodeCond(back)).toEqual({
      type: "NodeReachable",
      status: "True",
      reason: "Reachable",
      message: "its node answered again: observed the engine running",
      lastTransitionTime: T1,
    });
    // Never made up for a node that never failed.
    expect(withNodeReachable([], { answered: "observed the engine running" }, T1)).toEqual([]);
  });
});

describe("NodeReachable from a full observation (markObserved)", () => {
  it("writes False while the engine's node fails its observation, and True once it is observed again", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "narwhal-node-faults-"));
    try {
      const store = await stores.open(path.join(dir, "state"));
      await store.update("engine-2", () => record("engine-2"));
      const plan = { halted: [] } as unknown as Plan;
      const at = (o: ObservedEngine, when: string) => observedOf([o], { at: when });
      const d = { engine: "engine-2", role: "decode", backend: "native", input_hash: "h" } as DesiredEngine;
      const down = captured(d, {
        liveness: "unknown",
        node_fault: { node: "node-b", reason: "unreachable", message: "node node-b: cannot reach" },
      });
      expect(markObserved(store, at(down, T0), plan, true)).toBe(true);
      expect(store.engine("engine-2")!.conditions).toEqual([
        {
          type: "NodeReachable",
          status: "False",
          reason: "Unreachable",
          message: "node node-b: cannot reach",
          lastTransitionTime: T0,
        },
      ]);
      // A light observation is no evidence: it changes nothing.
      markObserved(store, at(captured(d), T1), plan, false);
      expect(store.engine("engine-2")!.conditions[0]!.status).toBe("False");
      markObserved(store, at(captured(d), T1), plan, true);
      expect(store.engine("engine-2")!.conditions[0]).toMatchObject({
        status: "True",
        reason: "Reachable",
        lastTransitionTime: T1,
      });
      // Observed again with nothing changed: only when is written, not the record.
      await store.flush();
      const journal = path.join(dir, "state", "narwhal.journal");
      const before = (await readFile(journal, "utf8")).length;
      expect(markObserved(store, at(captured(d), T2), plan, true)).toBe(true);
      await store.flush();
      const last = (await readFile(journal, "utf8")).trimEnd().split("\n").at(-1)!;
      expect(JSON.parse(last).ops).toEqual([{ observed: T2, engines: ["engine-2"] }]);
      expect((await readFile(journal, "utf8")).length - before).toBeLessThan(200);
      expect(store.engine("engine-2")!.conditions[0]).toMatchObject({ status: "True", lastTransitionTime: T1 });
    } finally {
      await stores.closeAll();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
