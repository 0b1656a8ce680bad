// An in-process Controller over a simulated native fleet: real phases, real
// simulator processes, temp dirs. It records every transition and every
// serving-fleet write the controller reports through its hooks, keeps the log
// (debug level) in memory, and lets a test wait on those signals — never on a
// sleep. Tests interleave reloads, resyncs, removals and engine deaths with it.
import fs from "node:fs";
import path from "node:path";
import { loadConfig, type Config } from "../../src/config.js";
import { Controller, type ControllerHooks } from "../../src/controller/controller.js";
import type { ServingFleet } from "../../src/controller/plan-types.js";
import { backendsFor, nodeHostsFor } from "../../src/cli/runtime.js";
import { appIdentity, checkScriptPath } from "../../src/app.js";
import type { LauncherIdentity } from "../../src/launcher.js";
import { loadDesired } from "../../src/desired/load.js";
import type { DesiredState, EngineSpec } from "../../src/desired/types.js";
import type { EngineBackend } from "../../src/backends/types.js";
import { memoryLogger, type LogLine } from "../log/memory-logger.js";

export { memoryLogger, type LogLine };
import { readState, type EngineRecord, type StateFile } from "../../src/state/store.js";
import type { EngineHandle } from "../../src/phases/types.js";
import { runsRoot } from "../../src/state/run-dir.js";
import { simFleet, type SimFleet, type SimFleetOptions } from "./sim-fleet.js";
import { TEST_ENV, engineProcesses, teardown, waitFor } from "./cli.js";
import { readProcStat } from "../../src/backends/proc.js";

export interface Transition {
  engine: string;
  from: string;
  to: string;
  /** Position among all transitions of this harness (0-based). */
  seq: number;
  /** When the hook reported it (epoch ms). */
  at: number;
}

/** What a wait looks at: the records so far, and the state file as it is on disk now. */
export interface HarnessView {
  transitions: readonly Transition[];
  serving: readonly ServingFleet[];
  state(): Promise<StateFile>;
}

export interface HarnessOptions {
  fleet?: SimFleetOptions;
  /** Configuration variables on top of the e2e suites' fast-retry TEST_ENV. */
  env?: Record<string, string>;
  /** ControllerOptions.concurrency (the work queue's bound). */
  concurrency?: number;
  /** How long a wait may take before it fails the test, naming what it waited for (default 120 s). */
  waitMs?: number;
  /** Run as another launcher (src/launcher.ts): the controller's and the desired specs' (default: this narwhal). */
  launcher?: LauncherIdentity;
}

/** A host environment for the controller, built here: never the test runner's process.env. */
function harnessEnv(root: string, env: Record<string, string>): Record<string, string> {
  return {
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    HOME: root,
    LANG: "C.UTF-8",
    NARWHAL_LOG_LEVEL: "debug",
    ...TEST_ENV,
    ...env,
  };
}

function nativePid(handle: EngineHandle | null | undefined): number | null {
  return handle && handle.kind === "native" ? handle.pid : null;
}

/** The engine a record keeps serving during its replacement (null: none), from its persisted snapshot. */
export function retiringHandle(record: EngineRecord | undefined): EngineHandle | null {
  const ctx = (record?.snapshot as { context?: { retiring?: { handle?: EngineHandle } | null } } | null)?.context;
  return ctx?.retiring?.handle ?? null;
}

export function retiringPid(record: EngineRecord | undefined): number | null {
  return nativePid(retiringHandle(record));
}

export function recordPid(record: EngineRecord | undefined): number | null {
  return nativePid(record?.handle);
}

/**
 * The backends with every runtime check of a held engine waiting until it is released: the real
 * check runs, later (a slow runtime). A test acts while a replacement is checked, however fast the machine.
 */
function withHeldChecks(
  backends: Record<string, EngineBackend>,
  held: Map<string, Promise<void>>,
): Record<EngineSpec["backend"], EngineBackend> {
  const gate = (backend: EngineBackend): EngineBackend =>
    new Proxy(backend, {
      get(target, prop) {
        if (prop === "runCheck") {
          return async (...args: Parameters<EngineBackend["runCheck"]>) => {
            await held.get(args[0].engine);
            return target.runCheck(...args);
          };
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  return { native: gate(backends.native!), container: gate(backends.container!) };
}

export class ControllerHarness {
  readonly transitions: Transition[] = [];
  readonly serving: ServingFleet[] = [];
  readonly lines: LogLine[];
  readonly controller: Controller;
  private readonly waiters = new Set<() => void>();
  private readonly listeners: Array<(event: { transition?: Transition; serving?: ServingFleet }) => void> = [];
  private stateWatch: fs.FSWatcher | null = null;
  private readonly heldChecks = new Map<string, Promise<void>>();
  private options: SimFleetOptions;

  private constructor(
    readonly fleet: SimFleet,
    readonly config: Config,
    fleetOptions: SimFleetOptions,
    private readonly opts: HarnessOptions,
  ) {
    this.options = fleetOptions;
    const { log, lines } = memoryLogger();
    this.lines = lines;
    const hooks: ControllerHooks = {
      transition: (engine, from, to) => this.record(engine, from, to),
      serving: (fleetNow) => {
        this.serving.push(fleetNow);
        for (const l of this.listeners) l({ serving: fleetNow });
        this.wake();
      },
    };
    const hosts = nodeHostsFor(config);
    const controllerOptions = {
      config,
      log,
      app: { ...appIdentity(), ...(opts.launcher ? { launcher: opts.launcher } : {}) },
      scriptPath: checkScriptPath(),
      backends: withHeldChecks(backendsFor(config, undefined, hosts), this.heldChecks),
      hosts,
      mode: "watch" as const,
      hooks,
      ...(opts.concurrency !== undefined ? { concurrency: opts.concurrency } : {}),
    };
    this.controller = new Controller(controllerOptions);
  }

  /** A fresh simulated fleet and a controller for it, opened; nothing applied yet. */
  static async create(opts: HarnessOptions = {}): Promise<ControllerHarness> {
    const fleetOptions = opts.fleet ?? {};
    const fleet = await simFleet(fleetOptions);
    const config = loadConfig(
      { desired: fleet.dir, state: fleet.stateDir },
      harnessEnv(path.dirname(fleet.dir), opts.env ?? {}),
    );
    const h = new ControllerHarness(fleet, config, fleetOptions, opts);
    await h.controller.open();
    // A state file renamed into place is a signal too: a wait on the records looks again.
    h.stateWatch = fs.watch(fleet.stateDir, () => h.wake());
    return h;
  }

  private record(engine: string, from: string, to: string): void {
    const t: Transition = { engine, from, to, seq: this.transitions.length, at: Date.now() };
    this.transitions.push(t);
    for (const l of this.listeners) l({ transition: t });
    this.wake();
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Called synchronously on every transition and serving write (to read files at that instant). */
  listen(fn: (event: { transition?: Transition; serving?: ServingFleet }) => void): void {
    this.listeners.push(fn);
  }

  /** The desired state as the files say now. */
  desired(): Promise<DesiredState> {
    return loadDesired(this.fleet.dir, this.opts.launcher ? { launcher: this.opts.launcher } : {});
  }

  /** Rewrite the desired files (from the options they were last written with) and load them. */
  async edit(fn: (o: SimFleetOptions) => SimFleetOptions): Promise<DesiredState> {
    this.options = fn(structuredClone(this.options));
    await this.fleet.write(this.options);
    return this.desired();
  }

  state(): Promise<StateFile> {
    return readState(this.fleet.stateDir);
  }

  /** A position in the transitions, to wait only for what comes after it. */
  mark(): number {
    return this.transitions.length;
  }

  since(mark: number): Transition[] {
    return this.transitions.slice(mark);
  }

  /**
   * Resolves with the predicate's first truthy value, evaluated now, after every transition and
   * serving write, and whenever a file is renamed into the state directory; fails after the harness's wait bound, naming `what` and the last transitions.
   */
  until<T>(
    what: string,
    predicate: (v: HarnessView) => T | undefined | null | false | Promise<T | undefined | null | false>,
  ): Promise<T> {
    const view: HarnessView = { transitions: this.transitions, serving: this.serving, state: () => this.state() };
    return new Promise<T>((resolve, reject) => {
      let done = false;
      let running = false;
      let again = false;
      const finish = (err: Error | null, value?: T) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.waiters.delete(check);
        if (err) reject(err);
        else resolve(value as T);
      };
      // One evaluation at a time; an event during one asks for another right after it.
      const check = () => {
        if (done) return;
        if (running) {
          again = true;
          return;
        }
        running = true;
        again = false;
        Promise.resolve()
          .then(() => predicate(view))
          .then(
            (value) => {
              running = false;
              if (value) finish(null, value);
              else if (again) check();
            },
            (err: unknown) => {
              running = false;
              finish(err instanceof Error ? err : new Error(String(err)));
            },
          );
      };
      const timer = setTimeout(
        () => finish(new Error(`timed out waiting for ${what}; last transitions:\n${this.describe()}`)),
        this.opts.waitMs ?? 120_000,
      );
      this.waiters.add(check);
      check();
    });
  }

  /** Every engine listed captured on disk at its desired hash (the names given, default: all desired). */
  untilCaptured(names: string[], what = `${names.join(", ")} captured`): Promise<StateFile> {
    return this.until(what, async (v) => {
      const state = await v.state();
      return names.every((n) => {
        const r = state.engines[n];
        return r?.phase === "captured" && r.running_hash === r.desired_hash && recordPid(r) !== null;
      })
        ? state
        : undefined;
    });
  }

  /** The last transitions, one per line, for a failure message. */
  describe(n = 40): string {
    const t0 = this.transitions[0]?.at ?? 0;
    return this.transitions
      .slice(-n)
      .map((t) => `${t.seq} +${t.at - t0}ms ${t.engine}: ${t.from || "-"} → ${t.to}`)
      .join("\n");
  }

  /** Hold every runtime check of an engine from now until the returned release is called. */
  holdChecks(engine: string): () => void {
    let release!: () => void;
    this.heldChecks.set(engine, new Promise<void>((r) => (release = r)));
    return () => {
      this.heldChecks.delete(engine);
      release();
    };
  }

  /** How many stop steps began for an engine (the phase actors' "stop begins" debug line). */
  stopCount(engine: string): number {
    return this.lines.filter((l) => l.message === "stop begins" && l.meta.engine === engine).length;
  }

  /** Errors the controller logged (none may be swallowed). */
  problems(): LogLine[] {
    return this.lines.filter((l) => l.level === "error");
  }

  /** SIGKILL an engine's process group, by the pid its record holds (`retiring`: the one kept during its replacement). */
  async kill(engine: string, which: "running" | "retiring" = "running"): Promise<number> {
    const record = (await this.state()).engines[engine];
    const handle = which === "running" ? record?.handle : retiringHandle(record);
    if (!handle || handle.kind !== "native")
      throw new Error(`${engine} has no ${which} process recorded; transitions:\n${this.describe()}`);
    process.kill(-handle.pgid, "SIGKILL");
    // SIGKILL is sent, not done: the leader may still show running for a moment. The caller's next observation
    // must see it gone (a full observation takes liveness from its own process-table scan, made right after).
    await waitFor(
      `${engine}'s ${which} pid ${handle.pid} to die`,
      async () => {
        const stat = await readProcStat(handle.pid);
        return stat === null || stat.state === "Z";
      },
      10_000,
    );
    return handle.pid;
  }

  /** Engine processes (group leaders) this state directory owns, from /proc. */
  processes(): Promise<Array<{ pid: number; engine: string }>> {
    return engineProcesses(this.fleet.stateDir);
  }

  /** Run directories created for an engine (state/runs/<engine>/...). */
  runDirs(engine: string): string[] {
    const dir = runsRoot(this.fleet.stateDir, engine);
    try {
      return fs.readdirSync(dir).filter((d) => !d.startsWith("."));
    } catch {
      return [];
    }
  }

  /** The work queue has nothing pending or running (waitIdle, when the controller has it), and every engine has settled. */
  async settle(): Promise<void> {
    await this.controller.waitIdle();
    await this.controller.waitSettled();
  }

  /** Close the controller and leave its engines running (a next controller or CLI takes over; it tears down). */
  async detach(): Promise<void> {
    this.stateWatch?.close();
    await this.controller.close();
  }

  /** Close the controller (engines keep running), then stop every engine the state directory owns. */
  async close(): Promise<void> {
    this.stateWatch?.close();
    try {
      await this.controller.close();
    } finally {
      await teardown(this.fleet.stateDir);
    }
  }
}
