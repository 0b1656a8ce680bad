// The engine machine's transitions, driven by a scripted world (engine-world.ts): the
// actors are plain functions over a small in-memory host that records every call, so
// each test can assert what was done, in which order, with which inputs.
import { describe, expect, it } from "vitest";
import { createActor, fromPromise, waitFor } from "xstate";
import { engineMachine, isSettled, type StepInput } from "../../machines/engine.js";
import { EngineLost, inStep, type Step } from "../../src/errors.js";
import { classifySshFailure } from "../../src/hosts/ssh-errors.js";
import type { CheckResult, EngineHandle } from "../../src/phases/types.js";
import { actors, retry, settled, spawnEngine, steps, world } from "./engine-world.js";

describe("engine machine", () => {
  it("walks inspected → prepared → checked → started → probed → captured, threading each step's output", async () => {
    const w = world();
    const s = await settled(spawnEngine(w));
    expect(s.value).toBe("captured");
    expect(steps(w)).toEqual(["inspect", "prepare", "check", "start", "probe", "capture"]);
    expect(w.calls[2]!.input.run!.dir).toBe("/runs/1");
    expect(w.calls[4]!.input.handle!.launch_token).toBe("t1");
    expect(s.context.runningHash).toBe("h1");
    expect(s.context.attempts).toBe(0);
  });

  it("retries a retryable failure from the same step after a backoff", async () => {
    const w = world({ check: [{ retryable: true }] });
    const s = await settled(spawnEngine(w));
    expect(s.value).toBe("captured");
    expect(steps(w)).toEqual(["inspect", "prepare", "check", "check", "start", "probe", "capture"]);
    expect(s.context.error).toBeNull();
  });

  it("stops at a non-retryable failure with the step and reason", async () => {
    const w = world({ probe: [{ retryable: false }] });
    const s = await settled(spawnEngine(w));
    expect(s.value).toBe("failed");
    expect(s.context.terminal).toBe(true);
    expect(s.context.error).toMatchObject({ step: "probe", message: "probe broke", retryable: false });
    expect(s.context.handle).not.toBeNull(); // the engine is left for the operator to inspect
  });

  it("turns terminal after maxAttempts retryable failures", async () => {
    const w = world({ inspect: [{ retryable: true }, { retryable: true }, { retryable: true }] });
    const s = await settled(spawnEngine(w));
    expect(s.value).toBe("failed");
    expect(s.context.attempts).toBe(3);
    expect(steps(w)).toEqual(["inspect", "inspect", "inspect"]);
  });

  it("retries a failed start from a fresh run", async () => {
    const w = world({ start: [{ retryable: true }] });
    const s = await settled(spawnEngine(w));
    expect(s.value).toBe("captured");
    expect(steps(w)).toEqual([
      "inspect",
      "prepare",
      "check",
      "start",
      "inspect",
      "prepare",
      "check",
      "start",
      "probe",
      "capture",
    ]);
    expect(w.calls[5]!.input.run).toBeNull(); // prepare did not get the spent run
    expect(s.context.run!.dir).toBe("/runs/2");
  });

  it("replaces a running engine when its input hash changes — stopping it only once the new plan is checked — and ignores an unchanged hash", async () => {
    const w = world();
    const a = spawnEngine(w);
    await settled(a);
    a.send({ type: "DESIRED_CHANGED", desiredHash: "h1" });
    expect(a.getSnapshot().value).toBe("captured");
    a.send({ type: "DESIRED_CHANGED", desiredHash: "h2" });
    const s = await settled(a);
    expect(s.value).toBe("captured");
    expect(steps(w).slice(6)).toEqual(["inspect", "prepare", "check", "stop", "start", "probe", "capture"]);
    expect(w.calls[6]!.input.retiring!.handle.launch_token).toBe("t1"); // inspect knows whose ports it may ignore
    expect(w.calls[9]!.input.handle!.launch_token).toBe("t1");
    expect(s.context.retiring).toBeNull();
    expect(s.context.runningHash).toBe("h2");
    expect(s.context.run!.dir).toBe("/runs/2");
  });

  it("keeps the old engine running when the replacement plan fails its check", async () => {
    const w = world();
    const a = spawnEngine(w);
    await settled(a);
    w.failures.check = [{ retryable: false }];
    a.send({ type: "DESIRED_CHANGED", desiredHash: "h2" });
    const s = await settled(a);
    expect(s.value).toBe("failed");
    expect(steps(w)).not.toContain("stop");
    expect(s.context.retiring!.handle.launch_token).toBe("t1");
    expect(s.context.runningHash).toBe("h1");
  });

  it("removes: stops the engine and ends in removed", async () => {
    const w = world();
    const a = spawnEngine(w);
    await settled(a);
    a.send({ type: "REMOVE" });
    const s = await settled(a);
    expect(s.value).toBe("removed");
    expect(steps(w).at(-1)).toBe("stop");
  });

  it("restarts a lost engine from a fresh run, after a backoff", async () => {
    const w = world();
    const a = spawnEngine(w);
    await settled(a);
    a.send({ type: "ENGINE_LOST", reason: "exited with status 1" });
    expect(a.getSnapshot().value).toBe("failed");
    expect(a.getSnapshot().context.error).toMatchObject({
      step: "observe",
      message: "the engine is no longer running: exited with status 1",
      retryable: true,
    });
    const s = await settled(a);
    expect(s.value).toBe("captured");
    expect(steps(w).filter((x) => x === "stop")).toEqual([]);
    expect(s.context.run!.dir).toBe("/runs/2");
  });

  it("restarts from a fresh run an engine its probe found gone, spending one attempt, never probing the dead one again", async () => {
    const w = world({ probe: [new EngineLost("engine-1", "probe", "exited (its probe failed: GET /health failed)")] });
    const a = spawnEngine(w);
    await waitFor(a, (s) => s.value === "failed", { timeout: 5000 });
    expect(a.getSnapshot().context).toMatchObject({
      attempts: 1,
      retryFrom: "pending",
      handle: null,
      runningHash: null,
      error: { name: "EngineLost", step: "probe", retryable: true },
    });
    const s = await settled(a);
    expect(s.value).toBe("captured");
    expect(steps(w)).toEqual([
      ...["inspect", "prepare", "check", "start", "probe"],
      ...["inspect", "prepare", "check", "start", "probe", "capture"],
    ]);
    expect(w.calls[6]!.input.run).toBeNull(); // prepare did not get the spent run
    expect(s.context.run!.dir).toBe("/runs/2");
  });

  it("a capture that found its engine gone is retried from a fresh run too", async () => {
    const w = world({ capture: [new EngineLost("engine-1", "capture", "exited")] });
    const s = await settled(spawnEngine(w));
    expect(s.value).toBe("captured");
    expect(steps(w).slice(6)).toEqual(["inspect", "prepare", "check", "start", "probe", "capture"]);
    expect(s.context.run!.dir).toBe("/runs/2");
  });

  it("gives up on a crash-looping engine once its attempts are spent", async () => {
    const w = world();
    const a = spawnEngine(w);
    for (let i = 1; i <= retry.maxAttempts; i++) {
      await waitFor(a, (s) => s.value === "captured", { timeout: 5000 });
      a.send({ type: "ENGINE_LOST", reason: `crash ${i}` });
    }
    const s = await settled(a);
    expect(s.value).toBe("failed");
    expect(s.context.terminal).toBe(true);
    expect(s.context.error!.message).toMatch(/crash 3/);
  });

  it("re-runs the interrupted step after a persisted snapshot is restored", async () => {
    const w = world();
    const machine = engineMachine.provide({
      actors: { ...actors(w), start: fromPromise<EngineHandle, StepInput>(() => new Promise(() => undefined)) },
    });
    const first = createActor(machine, { input: { engine: "engine-1", desiredHash: "h1", retry } });
    first.start();
    await waitFor(first, (s) => s.value === "checked");
    const persisted = JSON.parse(JSON.stringify(first.getPersistedSnapshot()));
    first.stop();
    const w2 = world();
    const s = await settled(spawnEngine(w2, persisted));
    expect(s.value).toBe("captured");
    expect(steps(w2)).toEqual(["start", "probe", "capture"]);
    expect(w2.calls[0]!.input.run!.dir).toBe("/runs/1");
  });
});

describe("engine machine: what retrying can and cannot fix (failure classes)", () => {
  it("a terminal failure at start stops at once, with one attempt, and waits for a desired edit, which gives a fresh budget", async () => {
    const w = world({ start: [{ failure: "terminal" }] });
    const a = spawnEngine(w);
    const s = await settled(a);
    expect(s.value).toBe("failed");
    expect(s.context).toMatchObject({
      terminal: true,
      attempts: 1,
      error: { step: "start", failure: "terminal", retryable: false },
    });
    expect(steps(w)).toEqual(["inspect", "prepare", "check", "start"]);
    a.send({ type: "DESIRED_CHANGED", desiredHash: "h2" });
    const after = await settled(a);
    expect(after.value).toBe("captured");
    expect(steps(w).slice(4)).toEqual(["inspect", "prepare", "check", "start", "probe", "capture"]);
  });

  it("outwaits a cause outside its control far past maxAttempts without using an attempt, and converges once it clears", async () => {
    const outwaits = Array.from({ length: retry.maxAttempts * 3 }, () => ({ failure: "outwait" as const }));
    const w = world({ inspect: [...outwaits] });
    const a = spawnEngine(w);
    const waiting = await waitFor(a, (s) => s.value === "failed" && (s.context.waits ?? 0) === 2, { timeout: 5000 });
    expect(waiting.context).toMatchObject({
      attempts: 0,
      terminal: false,
      error: { failure: "outwait", retryable: true },
    });
    expect(waiting.context.waitingSince).toBeTypeOf("number");
    expect(isSettled("failed", waiting.context)).toBe(false);
    const s = await settled(a);
    expect(s.value).toBe("captured");
    expect(steps(w).filter((x) => x === "inspect")).toHaveLength(outwaits.length + 1);
    expect(s.context).toMatchObject({ attempts: 0, waits: 0, waitingSince: null });
  });

  it("paces re-checks by the outwait cap (the resync cadence), not by the retry cap", async () => {
    const policy = { ...retry, baseMs: 50, capMs: 60_000, outwaitCapMs: 50 };
    const w = world({ inspect: Array.from({ length: 8 }, () => ({ failure: "outwait" as const })) });
    const started = Date.now();
    const s = await settled(spawnEngine(w, undefined, policy));
    expect(s.value).toBe("captured");
    // Eight re-checks at most 50 ms apart; the retry cap would have let the later ones wait minutes.
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("with a bound (reconcile --once), gives up once the cause has lasted past it, saying so", async () => {
    const policy = { ...retry, outwaitCapMs: 20, outwaitForMs: 150 };
    const w = world({ inspect: Array.from({ length: 1000 }, () => ({ failure: "outwait" as const })) });
    const s = await settled(spawnEngine(w, undefined, policy));
    expect(s.value).toBe("failed");
    expect(s.context).toMatchObject({ terminal: true, attempts: 0, error: { step: "inspect", failure: "outwait" } });
    expect(s.context.error!.message).toMatch(
      /^inspect broke \(unchanged after outwaiting it for \d+ s, the bound of reconcile --once/,
    );
    expect(steps(w).length).toBeGreaterThan(retry.maxAttempts);
  });

  it("counts retryable failures after an outwaited cause cleared from a fresh streak", async () => {
    const w = world({
      inspect: [{ failure: "outwait" }, { failure: "outwait" }],
      check: [{ retryable: true }, { retryable: true }, { retryable: true }],
    });
    const s = await settled(spawnEngine(w));
    expect(s.value).toBe("failed");
    expect(s.context).toMatchObject({ terminal: true, attempts: 3, waits: 0, waitingSince: null });
  });
});

describe("engine machine after a terminal failure", () => {
  it("RETRY starts a fresh attempt budget from the failed step", async () => {
    const w = world({ check: [{ retryable: false }] });
    const a = spawnEngine(w);
    expect((await settled(a)).value).toBe("failed");
    a.send({ type: "RETRY" });
    const s = await settled(a);
    expect(s.value).toBe("captured");
    expect(steps(w)).toEqual(["inspect", "prepare", "check", "check", "start", "probe", "capture"]);
  });
});

describe("engine machine when the desired state reverts mid-replacement", () => {
  it("keeps the retiring engine and drops the replacement, restarting nothing", async () => {
    // The first check passes; the replacement's check hangs, so the revert arrives mid-replacement.
    let checks = 0;
    const w2 = world();
    const m2 = engineMachine.provide({
      actors: {
        ...actors(w2),
        check: fromPromise<CheckResult, StepInput>(() =>
          ++checks === 1 ? Promise.resolve({ plan_sha256: "p" } as CheckResult) : new Promise(() => undefined),
        ),
      },
    });
    const b = createActor(m2, { input: { engine: "engine-1", desiredHash: "h1", retry } });
    b.start();
    await waitFor(b, (s) => s.value === "captured");
    const before = b.getSnapshot().context;
    b.send({ type: "DESIRED_CHANGED", desiredHash: "h2" });
    await waitFor(b, (s) => s.value === "prepared"); // the replacement's check is in flight
    b.send({ type: "DESIRED_CHANGED", desiredHash: "h1" });
    const s = b.getSnapshot();
    expect(s.value).toBe("captured");
    expect(s.context.handle).toEqual(before.handle);
    expect(s.context.run).toEqual(before.run);
    expect(s.context.layout).toEqual(before.layout);
    expect(s.context.retiring).toBeNull();
    expect(s.context.runningHash).toBe("h1");
    expect(steps(w2).filter((x) => x === "stop" || x === "start")).toEqual(["start"]);
  });
});

describe("engine machine: steps that are not abandoned halfway", () => {
  /** A world whose start waits until the test releases it. */
  function gatedStart() {
    const w = world();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const base = actors(w);
    const machine = engineMachine.provide({
      actors: {
        ...base,
        start: fromPromise<EngineHandle, StepInput>(async ({ input }) => {
          w.calls.push({ step: "start", input });
          await gate;
          return {
            kind: "native",
            pid: 100 + w.runs,
            pgid: 100 + w.runs,
            boot_id: "b",
            start_ticks: 1,
            launch_token: input.run!.launch_token,
          };
        }),
      },
    });
    const a = createActor(machine, { input: { engine: "engine-1", desiredHash: "h1", retry } });
    a.start();
    return { w, a, release };
  }

  it("records the engine a start created before applying a desired change that arrived meanwhile", async () => {
    const { w, a, release } = gatedStart();
    await waitFor(a, (s) => s.value === "checked");
    a.send({ type: "DESIRED_CHANGED", desiredHash: "h2" });
    expect(a.getSnapshot().value).toBe("checked"); // the start is not abandoned
    release();
    const s = await settled(a);
    expect(s.value).toBe("captured");
    expect(s.context.desiredHash).toBe("h2");
    const stop = w.calls.find((c) => c.step === "stop");
    expect(stop?.input.handle?.launch_token).toBe("t1"); // the engine the first start created was stopped, not leaked
  });

  it("removes an engine whose start was running when REMOVE arrived", async () => {
    const { w, a, release } = gatedStart();
    await waitFor(a, (s) => s.value === "checked");
    a.send({ type: "REMOVE" });
    release();
    const s = await settled(a);
    expect(s.value).toBe("removed");
    expect(w.calls.at(-1)!.step).toBe("stop");
    expect(w.calls.at(-1)!.input.handle!.launch_token).toBe("t1");
  });

  it("retries a failed removal as a stop, not as the procedure", async () => {
    const w = world();
    const a = spawnEngine(w);
    await settled(a);
    w.failures.stop = [{ retryable: true }];
    a.send({ type: "REMOVE" });
    const s = await settled(a);
    expect(s.value).toBe("removed");
    expect(steps(w).slice(6)).toEqual(["stop", "stop"]);
  });
});

// Issue 10 item 4: a step that fails because its node cannot be reached (NodeUnreachable, as
// SshHost raises it and the phase actors name it with inStep) is outwaited: no attempt is used,
// and once the node answers the engine goes on where it was, with its run and its handle.
describe("engine machine when the engine's node cannot be reached", () => {
  const target = { node: "node-b", destination: "root@10.99.0.2", port: 22, knownHostsFile: "/k" };
  const unreachable = (step: Step, n = retry.maxAttempts * 2) =>
    Array.from({ length: n }, () =>
      inStep(
        classifySshFailure("ssh: connect to host 10.99.0.2 port 22: Connection refused", target),
        "engine-1",
        step,
      ),
    ) as Error[];

  it.each(["inspect", "prepare", "check", "probe", "capture"] as const)(
    "a %s cut off by its node is re-run past maxAttempts without using an attempt, with the same run",
    async (step) => {
      const w = world({ [step]: unreachable(step) });
      const s = await settled(spawnEngine(w));
      expect(s.value).toBe("captured");
      expect(s.context.attempts).toBe(0);
      expect(steps(w).filter((x) => x === step)).toHaveLength(retry.maxAttempts * 2 + 1);
      // Nothing before the failed step ran again, and one run was prepared.
      expect(steps(w).filter((x) => x === "inspect")).toHaveLength(step === "inspect" ? retry.maxAttempts * 2 + 1 : 1);
      expect(w.runs).toBe(1);
      expect(steps(w).filter((x) => x === "start")).toHaveLength(1);
      expect(s.context.run!.launch_token).toBe(`t${w.runs}`);
    },
  );

  it("records the failure with its node while it waits, using no attempt", async () => {
    const w = world({ probe: unreachable("probe", 1000) });
    const a = spawnEngine(w);
    const s = await waitFor(a, (x) => x.value === "failed" && (x.context.waits ?? 0) >= retry.maxAttempts + 1, {
      timeout: 5000,
    });
    expect(s.context).toMatchObject({ attempts: 0, terminal: false, retryFrom: "started" });
    expect(s.context.error).toMatchObject({
      name: "NodeUnreachable",
      node: "node-b",
      reason: "unreachable",
      step: "probe",
    });
    expect(s.context.handle!.launch_token).toBe("t1"); // the engine it probes is kept: it may well still run
    a.stop();
  });

  it("a start cut off by its node is retried from the same run (its launch token finds an engine spawned there), not a fresh one", async () => {
    const w = world({ start: unreachable("start") });
    const s = await settled(spawnEngine(w));
    expect(s.value).toBe("captured");
    expect(s.context.attempts).toBe(0);
    expect(steps(w).filter((x) => x === "inspect" || x === "prepare")).toEqual(["inspect", "prepare"]);
    const starts = w.calls.filter((c) => c.step === "start");
    expect(starts).toHaveLength(retry.maxAttempts * 2 + 1);
    expect(new Set(starts.map((c) => c.input.run!.launch_token))).toEqual(new Set(["t1"]));
    expect(s.context.run!.dir).toBe("/runs/1");
  });

  it("a stop of the engine being replaced, cut off by its node, keeps that engine as retiring and stops it once the node answers", async () => {
    const w = world();
    const a = spawnEngine(w);
    await settled(a);
    w.failures.stop = unreachable("stop");
    a.send({ type: "DESIRED_CHANGED", desiredHash: "h2" });
    const s = await settled(a);
    expect(s.value).toBe("captured");
    expect(s.context.attempts).toBe(0);
    const stops = w.calls.filter((c) => c.step === "stop");
    expect(stops).toHaveLength(retry.maxAttempts * 2 + 1);
    expect(new Set(stops.map((c) => c.input.handle!.launch_token))).toEqual(new Set(["t1"]));
    expect(steps(w).filter((x) => x === "start")).toHaveLength(2); // the old engine's, and the replacement's once t1 stopped
    expect(s.context.run!.dir).toBe("/runs/2");
  });

  it("a removal cut off by its node is retried as a stop of the same engine until the node answers", async () => {
    const w = world();
    const a = spawnEngine(w);
    await settled(a);
    w.failures.stop = unreachable("stop");
    a.send({ type: "REMOVE" });
    const s = await settled(a);
    expect(s.value).toBe("removed");
    expect(steps(w).slice(6)).toEqual(Array.from({ length: retry.maxAttempts * 2 + 1 }, () => "stop"));
    expect(new Set(w.calls.slice(6).map((c) => c.input.handle!.launch_token))).toEqual(new Set(["t1"]));
  });

  it("a host key the node no longer matches is terminal at once, keeping the run to resume from", async () => {
    const rejected = inStep(
      classifySshFailure(
        "@@@\nWARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!\nHost key verification failed.",
        target,
      ),
      "engine-1",
      "start",
    ) as Error;
    const w = world({ start: [rejected] });
    const s = await settled(spawnEngine(w));
    expect(s.value).toBe("failed");
    expect(s.context).toMatchObject({ terminal: true, attempts: 1, retryFrom: "checked" });
    expect(s.context.error).toMatchObject({ name: "HostKeyRejected", reason: "host-key", node: "node-b" });
    expect(s.context.run!.dir).toBe("/runs/1");
  });
});
