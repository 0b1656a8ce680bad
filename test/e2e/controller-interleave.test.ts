// Reloads, resyncs, removals and engine deaths interleaved on an in-process
// Controller over real simulator processes (issue 9, acceptance 2). Each case
// acts at a transition the controller reports, then checks the outcome in the
// state records and in /proc: pids alive, one process per engine, its port
// serving — and that nothing was stopped or started twice.
import { afterEach, describe, expect, it } from "vitest";
import {
  ControllerHarness,
  recordPid,
  retiringPid,
  type HarnessOptions,
  type Transition,
} from "./controller-harness.js";
import { alive } from "../desired-corpus/controller-harness.js";
import type { SimEngineOptions } from "./sim-fleet.js";
import type { StateFile } from "../../src/state/store.js";

const BOTH = ["engine-1", "engine-2"];
// engine-2 drains 2 s after SIGTERM (within the 3 s stop grace): its stop step stays in flight long
// enough to act during it. Both engines carry the switch, so they stay one group.
const SLOW_STOP: SimEngineOptions = { faults: "slow_stop=2@engine-2" };
const CHANGED_ARGS = ["--max-num-seqs", "64"];

let harness: ControllerHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

async function start(opts: HarnessOptions = {}): Promise<ControllerHarness> {
  harness = await ControllerHarness.create(opts);
  return harness;
}

async function converge(h: ControllerHarness): Promise<StateFile> {
  h.controller.apply(await h.desired());
  await h.untilCaptured(BOTH);
  await h.settle();
  return h.state();
}

const to = (engine: string, phase: string, from: number) => (v: { transitions: readonly Transition[] }) =>
  v.transitions.slice(from).some((t) => t.engine === engine && t.to === phase);

async function healthy(port: number): Promise<boolean> {
  try {
    return (await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(5000) })).status === 200;
  } catch {
    return false;
  }
}

/** Each named engine captured at its desired hash, its recorded process alive and the only one of its name, its port serving; no other engine runs. */
async function expectServing(h: ControllerHarness, names: string[]): Promise<StateFile> {
  const state = await h.state();
  const procs = await h.processes();
  expect(procs.map((p) => p.engine).sort(), h.describe()).toEqual([...names].sort());
  for (const name of names) {
    const r = state.engines[name];
    expect(r?.phase, `${name}\n${h.describe()}`).toBe("captured");
    expect(r!.running_hash).toBe(r!.desired_hash);
    const pid = recordPid(r);
    expect(alive(pid), `${name} pid ${pid}`).toBe(true);
    expect(procs.filter((p) => p.engine === name).map((p) => p.pid)).toEqual([pid]);
    expect(retiringPid(r), `${name} still records a retiring engine`).toBeNull();
    expect(await healthy(h.fleet.ports[Number(name.slice("engine-".length)) - 1]![0]!), `${name} serves`).toBe(true);
  }
  expect(Object.keys(state.engines).sort()).toEqual([...names].sort());
  expect(h.problems(), "errors the controller logged").toEqual([]);
  return state;
}

/** A converged fleet whose engine-2 is being removed: its stop has begun and the engine still drains. */
async function removingEngine2() {
  const h = await start({ fleet: { engines: [SLOW_STOP, SLOW_STOP] } });
  const before = await converge(h);
  const pid1 = recordPid(before.engines["engine-1"]);
  const pid2 = recordPid(before.engines["engine-2"]);
  const without = await h.edit((o) => ({ ...o, engines: [SLOW_STOP] }));
  const m = h.mark();
  h.controller.apply(without);
  await h.until("engine-2 removing", to("engine-2", "removing", m));
  expect(alive(pid2), "engine-2 drains while its stop runs").toBe(true);
  return { h, pid1, pid2, without, m };
}

const starts = (h: ControllerHarness, engine: string, from = 0) =>
  h.since(from).filter((t) => t.engine === engine && t.to === "started").length;

describe("an in-process controller, interleaved", () => {
  it("a burst of 20 resyncs while engines start: each engine started once, and the controller settles", async () => {
    const h = await start();
    h.controller.apply(await h.desired());
    // The first engine whose start is in flight.
    await h.until("an engine checked", (v) => v.transitions.some((t) => t.to === "checked"));
    for (let i = 0; i < 20; i++) h.controller.resync();
    await h.untilCaptured(BOTH);
    await h.settle();
    await expectServing(h, BOTH);
    for (const name of BOTH) {
      expect(h.runDirs(name), `${name}: one run directory`).toHaveLength(1);
      expect(starts(h, name), `${name}: started once\n${h.describe()}`).toBe(1);
    }
  });

  it("remove while removing: a second reload and a resync during engine-2's stop begin no second stop", async () => {
    const { h, pid1, pid2, without, m } = await removingEngine2();
    h.controller.apply(without);
    h.controller.resync();
    h.controller.apply(without);
    await h.until("engine-2 removed", to("engine-2", "removed", m));
    await h.settle();
    expect(h.stopCount("engine-2"), h.describe()).toBe(1);
    expect(alive(pid2)).toBe(false);
    const after = await expectServing(h, ["engine-1"]);
    expect(recordPid(after.engines["engine-1"])).toBe(pid1);
    expect(h.stopCount("engine-1")).toBe(0);
  });

  it("re-desired during stop: engine-2 desired again while its stop runs ends captured, one process, no error swallowed", async () => {
    const { h, pid1, pid2 } = await removingEngine2();
    const again = await h.edit((o) => ({ ...o, engines: [SLOW_STOP, SLOW_STOP] }));
    h.controller.apply(again);
    await h.untilCaptured(BOTH);
    await h.settle();
    const after = await expectServing(h, BOTH);
    expect(recordPid(after.engines["engine-1"])).toBe(pid1);
    expect(after.engines["engine-2"]!.desired_hash).toBe(again.specs.find((s) => s.name === "engine-2")!.input_hash);
    // The stop that had begun is not abandoned; nothing stops engine-2 a second time.
    expect(h.stopCount("engine-2"), h.describe()).toBe(1);
    expect(alive(pid2)).toBe(false);
  });

  it("revert mid-replacement: the original inputs applied again once the replacement is prepared keep the original engine", async () => {
    const h = await start();
    const before = await converge(h);
    const pids = Object.fromEntries(BOTH.map((n) => [n, recordPid(before.engines[n])]));
    const changed = await h.edit((o) => ({ ...o, engines: [{ extraArgs: CHANGED_ARGS }, {}] }));
    const release = h.holdChecks("engine-1");
    const m = h.mark();
    h.controller.apply(changed);
    // Inspected and prepared, its old engine not stopped yet: its check is held meanwhile.
    await h.until("engine-1's replacement prepared", to("engine-1", "prepared", m));
    const original = await h.edit((o) => ({ ...o, engines: [{}, {}] }));
    h.controller.apply(original);
    release();
    await h.until("engine-1 back at its original inputs", async (v) => {
      const r = (await v.state()).engines["engine-1"];
      return (
        r?.phase === "captured" &&
        r.desired_hash === before.engines["engine-1"]!.desired_hash &&
        r.running_hash === r.desired_hash
      );
    });
    await h.settle();
    const after = await expectServing(h, BOTH);
    for (const name of BOTH) expect(recordPid(after.engines[name]), name).toBe(pids[name]);
    expect(after.engines["engine-1"]!.run_dir).toBe(before.engines["engine-1"]!.run_dir);
    expect(starts(h, "engine-1", m), h.describe()).toBe(0);
    expect(h.stopCount("engine-1")).toBe(0);
  });

  it("lost retiring engine: killed while its replacement is prepared, it is forgotten, the replacement completes, nothing restarts it", async () => {
    const h = await start();
    const before = await converge(h);
    const pid1 = recordPid(before.engines["engine-1"]);
    const pid2 = recordPid(before.engines["engine-2"]);
    const changed = await h.edit((o) => ({ ...o, engines: [{ extraArgs: CHANGED_ARGS }, {}] }));
    // The replacement's check is held: it stays prepared, the old engine retiring, until released.
    const release = h.holdChecks("engine-1");
    const m = h.mark();
    h.controller.apply(changed);
    await h.until("engine-1's replacement prepared", to("engine-1", "prepared", m));
    expect(await h.kill("engine-1", "retiring")).toBe(pid1);
    h.controller.resync();
    // The resync observes the dead retiring engine and the record stops standing for it (the old
    // controller never looked at a retiring engine: only the replacement's stop cleared it).
    await h.until(
      "the record forgets engine-1's retiring engine",
      async (v) => retiringPid((await v.state()).engines["engine-1"]) === null,
    );
    expect((await h.state()).engines["engine-1"]!.phase).toBe("prepared");
    expect(
      h.lines.some(
        (l) =>
          l.level === "warn" &&
          l.meta.engine === "engine-1" &&
          /kept serving during the replacement, is gone/.test(l.message),
      ),
      "the forgetting is logged",
    ).toBe(true);
    release();
    await h.until("engine-1 replaced", async (v) => {
      const r = (await v.state()).engines["engine-1"];
      return (
        r?.phase === "captured" && r.desired_hash === changed.specs[0]!.input_hash && r.running_hash === r.desired_hash
      );
    });
    await h.settle();
    const after = await expectServing(h, BOTH);
    expect(recordPid(after.engines["engine-1"])).not.toBe(pid1);
    expect(recordPid(after.engines["engine-2"])).toBe(pid2);
    expect(alive(pid1)).toBe(false);
    // One replacement: one new run directory and one start; the old inputs never start again.
    expect(h.runDirs("engine-1"), h.describe()).toHaveLength(2);
    expect(starts(h, "engine-1", m), h.describe()).toBe(1);
  });

  it("engine death during a reload: engine-2 killed as engine-1's change is applied restarts from a fresh run, engine-1 is replaced, both captured", async () => {
    const h = await start();
    const before = await converge(h);
    const pid1 = recordPid(before.engines["engine-1"]);
    const changed = await h.edit((o) => ({ ...o, engines: [{ extraArgs: CHANGED_ARGS }, {}] }));
    const m = h.mark();
    const pid2 = await h.kill("engine-2");
    h.controller.apply(changed);
    h.controller.resync();
    await h.until("engine-1 replaced and engine-2 restarted", async (v) => {
      const s = await v.state();
      return BOTH.every((n) => {
        const r = s.engines[n];
        return (
          r?.phase === "captured" &&
          r.running_hash === r.desired_hash &&
          r.desired_hash === changed.specs.find((x) => x.name === n)!.input_hash &&
          ![pid1, pid2].includes(recordPid(r))
        );
      });
    });
    await h.settle();
    const after = await expectServing(h, BOTH);
    expect(alive(pid1)).toBe(false);
    expect(after.engines["engine-2"]!.run_dir).not.toBe(before.engines["engine-2"]!.run_dir);
    expect(after.engines["engine-1"]!.run_dir).not.toBe(before.engines["engine-1"]!.run_dir);
    for (const name of BOTH) {
      expect(h.runDirs(name), `${name}\n${h.describe()}`).toHaveLength(2);
      expect(starts(h, name, m), `${name}\n${h.describe()}`).toBe(1);
    }
  });
});
