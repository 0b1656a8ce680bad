// Watch mode against the ways files really get saved: an editor's atomic save,
// a chunked write, a delete and re-add, a burst of saves. Each must end in the
// right state with no needless restart — judged by engine pids, run
// directories and the history in the state file, never by the log alone.
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runtime, type DesiredTree } from "../desired/fixtures.js";
import {
  allCaptured,
  alive,
  engineMarks,
  sleep,
  startWatch,
  type EngineMark,
  type WatchController,
} from "../desired-corpus/controller-harness.js";
import { fileText, readDesired } from "../desired-corpus/tree.js";
import { engineProcesses, status, teardown, waitFor } from "./cli.js";
import { simFleet, type SimFleet } from "./sim-fleet.js";

const LAUNCH = "engine-launch.json";

describe("watch mode: how edits arrive", () => {
  let fleet: SimFleet;
  let controller: WatchController;
  let base: DesiredTree;
  let launchPath: string;

  /** engine-launch.json text with engine `k`'s extra_args set. */
  const launchWith = (args: Record<number, string[]>): string => {
    const t = structuredClone(base);
    for (const [k, a] of Object.entries(args)) runtime(t, Number(k))["extra_args"] = a;
    return fileText(t, "launch") as string;
  };
  /** An editor's save: write a temporary file beside it, then rename it over the original. */
  const atomicSave = async (text: string) => {
    const tmp = path.join(fleet.dir, `.${LAUNCH}.${process.hrtime.bigint()}.tmp`);
    await fs.writeFile(tmp, text);
    await fs.rename(tmp, launchPath);
  };
  /** Waits until the engines settle again; returns their marks. */
  const settled = () => waitFor("both captured", () => allCaptured(fleet.stateDir), 30_000);
  /** Waits until `engine` runs a new process in a new run directory, and everything is captured. */
  const replaced = (engine: string, before: Record<string, EngineMark>) =>
    waitFor(
      `${engine} replaced`,
      async () => {
        const m = await allCaptured(fleet.stateDir);
        return m && m[engine]!.pid !== before[engine]!.pid ? m : undefined;
      },
      30_000,
    );
  const expectSame = (now: Record<string, EngineMark>, before: Record<string, EngineMark>, engine: string) =>
    expect(now[engine], `${engine} untouched`).toEqual(before[engine]);
  const expectReplacedOnce = (now: Record<string, EngineMark>, before: Record<string, EngineMark>, engine: string) => {
    expect(now[engine]!.pid).not.toBe(before[engine]!.pid);
    expect(now[engine]!.run_dir).not.toBe(before[engine]!.run_dir);
    expect(now[engine]!.starts - before[engine]!.starts, `${engine} started exactly once more`).toBe(1);
    expect(alive(before[engine]!.pid), "the old engine was stopped").toBe(false);
  };

  beforeAll(async () => {
    fleet = await simFleet();
    launchPath = path.join(fleet.dir, LAUNCH);
    base = await readDesired(fleet.dir);
    // A debounce well above the bursts' 40 ms gaps even on a loaded machine: a gap longer than the
    // debounce is a real pause in editing, and would rightly reload mid-burst.
    controller = startWatch(fleet.dir, fleet.stateDir, { NARWHAL_WATCH_DEBOUNCE_MS: "500" });
    await settled();
  });
  afterAll(async () => {
    await controller?.stop();
    await teardown(fleet.stateDir);
  });

  it("(a) an atomic save of engine-2's extra_args replaces exactly engine-2, once", async () => {
    const before = await settled();
    const at = controller.mark();
    await atomicSave(launchWith({ 2: ["--max-num-seqs", "16"] }));
    await replaced("engine-2", before);
    await sleep(1500); // a second replacement would have begun by now
    const after = await settled();
    expectSame(after, before, "engine-1");
    expectReplacedOnce(after, before, "engine-2");
    expect(controller.applied(at)).toBe(1);
    expect(controller.since(at)).not.toMatch(/desired state is invalid/);
    // The old engine-2 was stopped by its replacement, not swept later as an orphan.
    expect(controller.since(at)).not.toMatch(/orphaned engine/);
    // status agrees with the state file.
    const view = Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, e]));
    expect(view["engine-2"]!.pid).toBe(after["engine-2"]!.pid);
    expect(view["engine-2"]!.run_dir).toBe(after["engine-2"]!.run_dir);
    base = await readDesired(fleet.dir);
  });

  // 300 ms as the issue asks; 900 ms outlasts the debounce by far, so the half file is surely reloaded.
  it.each([
    [300, "8"],
    [900, "12"],
  ])(
    "(b) a chunked write (half, %i ms pause, rest) touches nothing until complete, then replaces once",
    async (pauseMs, seqs) => {
      const before = await settled();
      const at = controller.mark();
      const text = launchWith({ 2: ["--max-num-seqs", seqs] });
      const fh = await fs.open(launchPath, "w");
      await fh.write(text.slice(0, Math.floor(text.length / 2)));
      await fh.sync();
      // While half-written: nothing may move.
      for (let waited = 0; waited < pauseMs; waited += 100) {
        await sleep(100);
        const now = await engineMarks(fleet.stateDir);
        expectSame(now, before, "engine-1");
        expectSame(now, before, "engine-2");
      }
      await fh.write(text.slice(Math.floor(text.length / 2)));
      await fh.close();
      await replaced("engine-2", before);
      await sleep(1500);
      const after = await settled();
      expectSame(after, before, "engine-1");
      expectReplacedOnce(after, before, "engine-2");
      const halfLogged = /engine-launch\.json \$: is (truncated|empty)/.test(controller.since(at));
      if (pauseMs >= 900) expect(halfLogged, "the half-written file was reloaded and reported").toBe(true);
      console.log(
        `chunked write, ${pauseMs} ms pause: the half-written file was ${halfLogged ? "reloaded and reported as invalid (nothing touched)" : "never reloaded"}; ${controller.applied(at)} reload(s) applied`,
      );
      base = await readDesired(fleet.dir);
    },
  );

  it("(c) deleting engine-launch.json and re-adding it within the grace period stops and restarts nothing", async () => {
    const before = await settled();
    const text = await fs.readFile(launchPath, "utf8");
    let at = controller.mark();
    await fs.rm(launchPath);
    await sleep(500); // inside the grace period (max(1 s, 5 × 200 ms debounce))
    await fs.writeFile(launchPath, text);
    await sleep(1500);
    expect(controller.since(at), "no reload while the file was briefly missing").not.toMatch(/is missing/);
    let now = await engineMarks(fleet.stateDir);
    expectSame(now, before, "engine-1");
    expectSame(now, before, "engine-2");

    // Missing for longer than the grace: the reload reports it, and still touches nothing.
    at = controller.mark();
    await fs.rm(launchPath);
    await controller.waitLog(/engine-launch\.json \$: is missing/, at);
    await sleep(1000);
    now = await engineMarks(fleet.stateDir);
    expectSame(now, before, "engine-1");
    expectSame(now, before, "engine-2");
    at = controller.mark();
    await fs.writeFile(launchPath, text);
    await controller.waitLog(/desired state applied/, at);
    await sleep(1000);
    now = await settled();
    expectSame(now, before, "engine-1");
    expectSame(now, before, "engine-2");
    expect((await engineProcesses(fleet.stateDir)).length).toBe(2);
  });

  it("(d) a burst of 50 saves in ~2 s: ending on the running content restarts nothing; ending on a change replaces once", async () => {
    let before = await settled();
    const original = await fs.readFile(launchPath, "utf8");
    const changed = launchWith({ 1: ["--max-num-seqs", "4"] });
    let at = controller.mark();
    // Alternating, ending on the original (the running state).
    for (let i = 0; i < 50; i++) {
      await atomicSave(i % 2 === 0 ? changed : original);
      await sleep(40);
    }
    await sleep(1500);
    let now = await settled();
    const firstBurst = controller.applied(at);
    expectSame(now, before, "engine-2");
    const { history: _h, ...kept } = now["engine-1"]!;
    const { history: _b, ...was } = before["engine-1"]!;
    if (firstBurst <= 1) {
      // The one reload after the burst found the running content: engine-1's process and run are the same.
      expect(kept, "engine-1 not restarted").toEqual(was);
    } else {
      // A loaded machine stalled the controller (or this test) past the 500 ms debounce mid-burst: it
      // rightly reloaded what was there, and may have replaced engine-1 on the way. A stall is rare; a
      // debounce that did not hold would reload on most of the 50 saves.
      expect(firstBurst, "reloads in a burst of 50 saves").toBeLessThanOrEqual(3);
      const plan = JSON.parse(await fs.readFile(path.join(now["engine-1"]!.run_dir!, "launch.json"), "utf8"));
      expect(plan.command.join(" "), "engine-1 ends on the content saved last").not.toContain("--max-num-seqs 4");
      before = now;
    }

    // The same burst ending on the change: exactly one replacement of engine-1, engine-2 untouched.
    at = controller.mark();
    for (let i = 0; i < 50; i++) {
      await atomicSave(i % 2 === 0 ? original : changed);
      await sleep(40);
    }
    await replaced("engine-1", before);
    await sleep(2000);
    now = await settled();
    expectReplacedOnce(now, before, "engine-1");
    expectSame(now, before, "engine-2");
    console.log(
      `burst of 50 saves: ${firstBurst} reload(s) when ending on the running content, ${controller.applied(at)} when ending on a change`,
    );
  });

  it("(e) a desired directory replaced wholesale (moved aside, a new one moved in) is still watched", async () => {
    const before = await settled();
    base = await readDesired(fleet.dir);
    const next = `${fleet.dir}.next`;
    await fs.mkdir(next);
    for (const f of ["deployment.env", "fleet.json"]) await fs.copyFile(path.join(fleet.dir, f), path.join(next, f));
    await fs.writeFile(path.join(next, LAUNCH), launchWith({ 1: ["--max-num-seqs", "2"] }));
    await fs.rename(fleet.dir, `${fleet.dir}.old`);
    await fs.rename(next, fleet.dir);
    const swapped = await replaced("engine-1", before);
    expectReplacedOnce(swapped, before, "engine-1");
    expectSame(swapped, before, "engine-2");
    // Edits inside the new directory are seen too.
    await atomicSave(launchWith({ 1: ["--max-num-seqs", "4"] }));
    await replaced("engine-1", swapped);
    await sleep(1000);
    const after = await settled();
    expectReplacedOnce(after, swapped, "engine-1");
    expectSame(after, before, "engine-2");
  });

  it("the controller is still healthy and stops cleanly, leaving the engines running", async () => {
    const running = (await engineProcesses(fleet.stateDir)).map((p) => p.pid).sort();
    expect(await controller.stop()).toBe(0);
    expect((await engineProcesses(fleet.stateDir)).map((p) => p.pid).sort()).toEqual(running);
  });
});
