// Watch mode, measured two ways. Latency: a controller watches a converged fleet; an editor's save of engine-launch.json
// (temp file + rename, as editors save) changes engine-1's extra_args; the latency is the time from the rename
// to the first state write that records a new transition of engine-1 (fs.watch on the state directory, so
// the write is seen when it lands, not at a poll; read through the journal, where a transition lands). After each sample the fleet settles (all captured) again.
// Cost (settledWatchCpu): the CPU a controller with nothing to do spends per resync period.
import { spawn } from "node:child_process";
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { median, procStatFields } from "./measure.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
// The state as the controller's readers see it: narwhal.json plus the journal's entries after it (a
// transition is an append to narwhal.journal; narwhal.json changes only when the journal is folded in).
const { readStateDir } = await import(path.join(root, "dist/src/state/state-journal.js"));
const readState = async (state) => {
  try {
    return (await readStateDir(state))?.state ?? null;
  } catch {
    return null; // a line being appended, or not yet written
  }
};

/** Resolves when `test(state)` holds, checking on every change in the state directory (and every second). */
function whenState(state, test, what, timeoutMs) {
  return whenDir(
    state,
    async () => {
      const s = await readState(state);
      return s && test(s) ? s : null;
    },
    what,
    timeoutMs,
  );
}

/** Resolves with `{ at, state: value }` once `probe()` gives a value, asked on every change in `dir` (and every second). */
function whenDir(dir, probe, what, timeoutMs) {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err, value) => {
      if (done) return;
      done = true;
      watcher.close();
      clearInterval(tick);
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(value);
    };
    const check = () =>
      void probe().then((value) => {
        if (value) finish(null, { at: performance.now(), state: value });
      });
    const watcher = fs.watch(dir, check);
    const tick = setInterval(check, 1000);
    const timer = setTimeout(() => finish(new Error(`watch bench: ${what} not within ${timeoutMs} ms`)), timeoutMs);
    check();
  });
}

/** How long the state directory must see no write for the controller to count as idle. */
const QUIET_MS = 1500;

/** Resolves once nothing in the state directory has changed for `ms`. */
function quiet(state, ms, timeoutMs) {
  return new Promise((resolve, reject) => {
    let timer;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        watcher.close();
        clearTimeout(limit);
        resolve();
      }, ms);
    };
    const watcher = fs.watch(state, { recursive: false }, arm);
    const limit = setTimeout(() => {
      watcher.close();
      clearTimeout(timer);
      reject(new Error(`watch bench: the state directory did not go quiet for ${ms} ms within ${timeoutMs} ms`));
    }, timeoutMs);
    arm();
  });
}

const lastTransition = (record) => JSON.stringify(record?.history.at(-1) ?? null);

const allCaptured = (s) =>
  Object.values(s.engines).length > 0 && Object.values(s.engines).every((e) => e.phase === "captured");

/**
 * A watch controller on the fleet, with `extra` in its environment, ready once it has applied the desired
 * state and every engine is captured; `log()` is its stderr's tail, `stop()` ends it (SIGTERM) and waits.
 */
async function readyController({ main, desired, state, env }, extra) {
  const controller = spawn(process.execPath, [main, "reconcile", "--desired", desired, "--state", state], {
    env: { ...env, ...extra },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  controller.stderr.on("data", (d) => (log = (log + d).slice(-20_000)));
  const exited = new Promise((resolve) => controller.once("exit", resolve));
  const stop = async () => {
    controller.kill("SIGTERM");
    await exited;
  };
  try {
    await whenState(state, (s) => /desired state applied/.test(log) && allCaptured(s), "controller ready", 120_000);
  } catch (err) {
    await stop();
    throw new Error(`${err.message}\ncontroller log tail:\n${log.slice(-3000)}`);
  }
  return { pid: controller.pid, log: () => log, stop };
}

// debounceMs: the controller's default (src/config.ts), set explicitly so the report names it.
export async function watchLatency({ main, desired, state, env, runs, debounceMs = 100 }) {
  const launchFile = path.join(desired, "engine-launch.json");
  const original = await fsp.readFile(launchFile, "utf8");
  const controller = await readyController(
    { main, desired, state, env },
    { NARWHAL_WATCH_DEBOUNCE_MS: String(debounceMs) },
  );
  const samples = [];
  try {
    await quiet(state, QUIET_MS, 180_000);
    for (let i = 0; i < runs; i++) {
      // The newest history entry marks where engine-1 stood (the history is capped: its length stops growing).
      const before = lastTransition((await readState(state)).engines["engine-1"]);
      const doc = JSON.parse(original);
      doc.engines["engine-1"].runtime.extra_args = ["--max-num-seqs", String(8 + i)];
      const tmp = path.join(desired, `.engine-launch.json.${i}.tmp`);
      await fsp.writeFile(tmp, JSON.stringify(doc));
      const saved = performance.now();
      const seen = whenState(
        state,
        (s) => lastTransition(s.engines["engine-1"]) !== before || s.engines["engine-1"]?.phase !== "captured",
        "a transition of engine-1",
        60_000,
      );
      await fsp.rename(tmp, launchFile);
      samples.push(Math.round((await seen).at - saved));
      await whenState(
        state,
        (s) => allCaptured(s) && lastTransition(s.engines["engine-1"]) !== before,
        "the fleet settled",
        180_000,
      );
      // Captured is not idle: the decodes prove KV from the restarted prefill next. Each sample starts from a
      // controller with nothing to do, so it measures the path from a save, not the work queued before it.
      await quiet(state, QUIET_MS, 180_000);
    }
  } catch (err) {
    throw new Error(`${err.message}\ncontroller log tail:\n${controller.log().slice(-3000)}`);
  } finally {
    await controller.stop();
    await fsp.writeFile(launchFile, original);
  }
  return {
    engines: Object.keys(JSON.parse(original).engines).length,
    debounce_ms: debounceMs,
    median_ms: median(samples),
    samples_ms: samples,
  };
}

/** CPU seconds (user + sys) process `pid` has used so far: /proc/<pid>/stat, in clock ticks of 10 ms. */
function cpuOf(pid) {
  const f = procStatFields(pid);
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** Lines of the state's journal: a settled controller's every resync appends one (when it observed the engines). */
async function journalLines(state) {
  const text = await fsp.readFile(path.join(state, "narwhal.journal"), "utf8").catch(() => "");
  return text.split("\n").length - 1;
}

/**
 * What a settled watch controller costs: its CPU from one resync's state write to the `resyncs`-th after it
 * (each resync observes every engine: liveness, API key and health over HTTP, the process table; plans; and
 * appends one journal line), divided by `resyncs`. Anything else it does meanwhile (the decodes' KV-metrics
 * scrape) is in it too: this is the CPU of a resync period, not of the resync call alone.
 */
export async function settledWatchCpu({ main, desired, state, env, resyncMs = 3000, resyncs = 5 }) {
  const controller = await readyController({ main, desired, state, env }, { NARWHAL_RESYNC_MS: String(resyncMs) });
  const linesAtLeast = (n, what) =>
    // A guard, not a budget: on a loaded machine a pass of a large fleet can outlast the period (passes then coalesce).
    whenDir(state, async () => (await journalLines(state)) >= n, what, (resyncMs + 30_000) * (resyncs + 1));
  try {
    await quiet(state, QUIET_MS, 180_000);
    const first = (await journalLines(state)) + 1;
    await linesAtLeast(first, "a resync's state write");
    const before = { cpu: cpuOf(controller.pid), at: performance.now() };
    await linesAtLeast(first + resyncs, `${resyncs} more resyncs' state writes`);
    const cpu = cpuOf(controller.pid) - before.cpu;
    const wall = performance.now() - before.at;
    const engines = Object.keys((await readState(state)).engines).length;
    return {
      engines,
      resync_ms: resyncMs,
      resyncs,
      // Longer than resync_ms: passes outlasted the period (a loaded machine), and fewer ran than configured.
      measured_period_ms: Math.round(wall / resyncs),
      cpu_ms_per_resync: Math.round((cpu / resyncs) * 1000),
      per_engine_ms: Math.round((cpu / resyncs / engines) * 1000 * 100) / 100,
    };
  } catch (err) {
    throw new Error(`${err.message}\ncontroller log tail:\n${controller.log().slice(-3000)}`);
  } finally {
    await controller.stop();
  }
}
