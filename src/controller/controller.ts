// The controller: one engine actor per desired engine, each persisted after
// every transition. It resumes actors from the state file, observes the world
// first (a dead engine or an orphan wins over the snapshot), applies desired
// changes as events, and reports when everything has settled.
import { createActor, type Actor, type Snapshot } from "xstate";
import { engineMachine, isSettled, notWaiting, type EngineContext, type RetryPolicy } from "../../machines/engine.js";
import { failureOf } from "../errors.js";
import type { DesiredState, EngineSpec } from "../desired/types.js";
import type { EngineBackend } from "../backends/types.js";
import { StateStore } from "../state/store.js";
import { acquireStateLock, type StateLock } from "../state/lock.js";
import { phaseActors } from "./phase-actors.js";
import { recordFrom } from "./record.js";
import { adoptFromRun } from "./adopt.js";
import { SharedStarts } from "./shared-starts.js";
import { World, claimedTokens, type Owned } from "./world.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import type { AppIdentity } from "../phases/plan.js";
import type { Failpoint } from "../failpoints.js";
import { describeFailure, ioFailure } from "../errors.js";

type EngineActor = Actor<typeof engineMachine>;

const UNHEALTHY_STRIKES = 2;

interface Created {
  name: string;
  actor: EngineActor;
  /** The snapshot it was restored or adopted from (null: a fresh engine). */
  restored: ReturnType<EngineActor["getSnapshot"]> | null;
  /** Why the recorded engine is not running (null: it is, or there is none). */
  lost: string | null;
  /** Built from observation: its current step must be invoked anew. */
  adopted: boolean;
  desiredHash: string;
  backend: string;
  /** Known to the state file but no longer desired. */
  remove?: boolean;
}

export interface ControllerOptions {
  config: Config;
  log: Logger;
  app: AppIdentity;
  scriptPath: string;
  backends: Record<EngineSpec["backend"], EngineBackend>;
  failpoint?: Failpoint;
  /**
   * "watch" (default) outwaits a cause outside narwhal's control for as long as it lasts;
   * "once" (reconcile --once) for config.retry.onceOutwaitMs, so a CI run ends.
   */
  mode?: "once" | "watch";
}

/** The engines' retry policy for this controller: its configuration, not history. */
export function retryPolicy(config: Config, mode: ControllerOptions["mode"] = "watch"): RetryPolicy {
  const { baseMs, capMs, maxAttempts, onceOutwaitMs } = config.retry;
  // Outwaited causes are re-checked at most a resync period apart: as often as drift is.
  return { baseMs, capMs, maxAttempts, outwaitCapMs: config.watch.resyncMs, outwaitForMs: mode === "once" ? onceOutwaitMs : null };
}

export class Controller {
  private store!: StateStore;
  private lock!: StateLock;
  private readonly actors = new Map<string, EngineActor>();
  private specs = new Map<string, EngineSpec>();
  private secrets: string[] = [];
  private readonly settleWaiters = new Set<() => void>();
  /** Consecutive failed health checks per engine (watch mode). */
  private readonly unhealthy = new Map<string, number>();
  private readonly machine;
  private readonly world: World;
  private readonly retry: RetryPolicy;

  constructor(private readonly opts: ControllerOptions) {
    this.retry = retryPolicy(opts.config, opts.mode);
    this.world = new World(opts.backends, opts.log, opts.config.stopGraceMs);
    this.machine = engineMachine.provide({
      actors: phaseActors({
        stateDir: opts.config.stateDir,
        app: opts.app,
        scriptPath: opts.scriptPath,
        stopGraceMs: opts.config.stopGraceMs,
        log: opts.log,
        spec: (engine) => this.specs.get(engine),
        backend: (kind) => opts.backends[kind],
        persisted: () => this.store.flush(),
        secrets: () => this.secrets,
        sharedStarts: new SharedStarts({
          specs: () => [...this.specs.values()],
          running: (engine) => this.actors.get(engine)?.getSnapshot().context.handle != null,
          log: opts.log,
          waitMs: opts.config.sharedStartWaitMs,
        }),
      }),
    });
  }

  async open(): Promise<void> {
    try {
      this.lock = await acquireStateLock(this.opts.config.stateDir);
    } catch (err) {
      throw ioFailure(err, { step: "state" });
    }
    try {
      // Only the lock holder writes narwhal.log: a refused second command never touches it.
      this.opts.log.recordTo(this.opts.config.stateDir);
      this.store = await StateStore.open(this.opts.config.stateDir, this.opts.failpoint);
    } catch (err) {
      await this.lock.release();
      throw ioFailure(err, { step: "state" });
    }
    if (this.store.movedAside) this.opts.log.warn(`${this.store.asideReason}; moved aside to ${this.store.movedAside} and rebuilding from what is observed`);
    if (this.store.sweptTemps.length) this.opts.log.info(`removed ${this.store.sweptTemps.length} temp file(s) a killed controller left in ${this.opts.config.stateDir}`);
  }

  /**
   * Stop the actors (engines keep running), flush state, release the lock. A final write that
   * fails is thrown (an IoError naming the path and errno): the state on disk is not what happened.
   */
  async close(): Promise<void> {
    for (const actor of this.actors.values()) actor.stop();
    this.actors.clear();
    try {
      await this.store?.flush();
    } catch (err) {
      throw ioFailure(err, { step: "state", fix: `The state file could not be written, so the last transitions are not recorded: make ${this.opts.config.stateDir} writable, then run reconcile again (it rebuilds from what runs).` });
    } finally {
      await this.lock?.release();
    }
  }

  /** Bring actors in line with a (valid) desired state. */
  async apply(desired: DesiredState): Promise<void> {
    this.specs = new Map(desired.specs.map((s) => [s.name, s]));
    this.secrets = desired.secrets;
    this.opts.log.addSecrets(desired.secrets);
    for (const backend of Object.values(this.opts.backends)) backend.knowHosts?.(desired.specs);
    const first = this.actors.size === 0;
    // On the first apply, observe the world before any actor acts: engines this state directory
    // started are adopted (when the state file has no snapshot of them) or stopped as orphans.
    const owned = first ? await this.world.listOwned(true) : [];
    const created: Created[] = [];
    for (const spec of desired.specs) {
      const actor = this.actors.get(spec.name);
      if (actor) actor.send({ type: "DESIRED_CHANGED", desiredHash: spec.input_hash });
      else created.push(await this.build(spec.name, spec.input_hash, owned));
    }
    const known = new Set([...this.actors.keys(), ...Object.keys(this.store.data.engines), ...owned.map((o) => o.owned.engine)]);
    for (const name of known) {
      if (this.specs.has(name)) continue;
      if (!this.actors.has(name) && this.store.engine(name)) created.push({ ...(await this.build(name, this.store.engine(name)?.desired_hash ?? "", owned)), remove: true });
      else this.actors.get(name)?.send({ type: "REMOVE" });
    }
    if (first) await this.world.stopOrphans(owned, this.claimed());
    for (const c of created) this.begin(c);
    this.notify();
  }

  /** Create (not start) an engine's actor: from its persisted snapshot, or adopted from what runs. */
  private async build(name: string, desiredHash: string, owned: Owned): Promise<Created> {
    const record = this.store.engine(name);
    const input = { engine: name, desiredHash, retry: this.retry };
    let snapshot = record?.snapshot as (Snapshot<unknown> & { context?: Partial<EngineContext> }) | undefined | null;
    // The retry policy is this controller's configuration, not history: a restored actor takes the
    // current one, and an outwait streak counts from this controller's start (--once bounds it).
    if (snapshot?.context) Object.assign(snapshot.context, { retry: this.retry, ...notWaiting });
    let adoptedNow = false;
    let actor: EngineActor | undefined;
    if (snapshot) {
      // A snapshot this machine cannot take (written by another version, edited by hand): fall back to what is observed.
      const value = (snapshot as { value?: unknown }).value;
      const problem =
        typeof value !== "string" || !(value in this.machine.states) ? `unknown state ${JSON.stringify(value)}` : !snapshot.context ? "no context" : null;
      try {
        if (problem) throw new Error(problem);
        actor = createActor(this.machine, { snapshot, input });
        if (actor.getSnapshot().status !== "active") throw new Error(`restored as ${actor.getSnapshot().status}`);
      } catch (err) {
        actor = undefined;
        this.opts.log.warn(`could not restore ${name}'s snapshot (${(err as Error).message}); rebuilding it from what runs`, { engine: name });
      }
    }
    if (!actor) {
      const adopted = await this.adopt(name, desiredHash, owned);
      adoptedNow = adopted !== null;
      snapshot = adopted;
      actor = adopted ? createActor(this.machine, { snapshot: adopted, input }) : createActor(this.machine, { input });
    }
    this.actors.set(name, actor);
    // Observe before trusting the snapshot: a recorded engine that is gone is lost.
    // Checked before start() so that the restored step never acts on a dead engine.
    const restored = actor.getSnapshot();
    const handle = restored.context.handle;
    const lost = handle !== null ? await this.observeAtStart(handle, restored.context) : null;
    if (lost !== null && handle) await this.world.stop(handle).catch(() => undefined);
    return { name, actor, restored: snapshot ? restored : null, adopted: adoptedNow, lost, desiredHash, backend: this.specs.get(name)?.backend ?? record?.backend ?? "native" };
  }

  /** Why a recorded engine cannot be kept at controller start (null: it can): gone, or not holding its API key. */
  private async observeAtStart(handle: NonNullable<EngineContext["handle"]>, ctx: EngineContext): Promise<string | null> {
    if (!(await this.world.alive(handle))) return `found stopped at controller start (${await this.world.lostReason(ctx, this.secrets)})`;
    const key = ctx.run ? await this.world.keyProblem(handle, ctx.run.dir) : null;
    return key === null ? null : `found at controller start without its API key as recorded: ${key}`;
  }

  /** A snapshot for an engine with no usable record, from the engines this state directory runs. */
  private async adopt(name: string, desiredHash: string, owned: Owned): Promise<Snapshot<unknown> | null> {
    // Prefer an engine that serves the current inputs over one kept only until it is replaced.
    const candidates = [];
    for (const o of owned.filter((x) => x.owned.engine === name)) {
      const adopted = await adoptFromRun(o.owned, name, desiredHash, this.retry);
      if (adopted) candidates.push(adopted);
    }
    candidates.sort((a, b) => Number(a.context.retiring !== null) - Number(b.context.retiring !== null));
    const adopted = candidates[0];
    if (!adopted) return null;
    this.opts.log.warn(`no usable state recorded; adopting the running engine from ${adopted.context.run?.dir ?? adopted.context.retiring?.run?.dir} at ${adopted.value}`, { engine: name });
    return this.machine.resolveState(adopted) as unknown as Snapshot<unknown>;
  }

  /** Subscribe (persisting every transition), start, and send what observation found. */
  private begin({ name, actor, restored, adopted, lost, desiredHash, backend, remove }: Created): void {
    let lastPhase = "";
    actor.subscribe({
      next: (snap) => {
        const phase = String(snap.value);
        void this.store
          .update(name, (prev) => (phase === "removed" ? null : recordFrom(prev, phase, snap.context, backend, actor.getPersistedSnapshot())))
          .catch((err) => this.opts.log.error(`cannot write the state file: ${describeFailure(err)}`, { engine: name }));
        if (phase !== lastPhase) {
          this.opts.failpoint?.(`transition:${phase}`);
          this.logTransition(name, lastPhase, phase, snap.context);
          lastPhase = phase;
        }
        if (phase === "removed") {
          this.actors.delete(name);
          // Removed and desired again (a delete and re-add within one stop): start it over.
          const spec = this.specs.get(name);
          if (spec) void this.build(spec.name, spec.input_hash, []).then((c) => this.begin(c));
        }
        this.notify();
      },
      error: (err) => {
        this.opts.log.error(`engine actor crashed: ${String(err)}`, { engine: name });
        this.notify();
      },
    });
    actor.start();
    if (adopted && lost === null) actor.send({ type: "RESUME" });
    if (lost !== null) actor.send({ type: "ENGINE_LOST", reason: lost });
    // A failure recorded by an earlier controller run gets a fresh attempt: rerunning is the operator's request.
    if (restored?.value === "failed") actor.send({ type: restored.context.terminal ? "RETRY" : "RESUME" });
    if (restored && desiredHash && restored.context.desiredHash !== desiredHash) actor.send({ type: "DESIRED_CHANGED", desiredHash });
    if (remove) actor.send({ type: "REMOVE" });
  }

  private logTransition(name: string, from: string, to: string, ctx: EngineContext): void {
    if (to === "failed" && ctx.error) {
      const at = new Date(ctx.retryAt ?? 0).toISOString();
      const retry = ctx.terminal
        ? "terminal"
        : failureOf(ctx.error) === "outwait"
          ? `outwaiting a cause outside narwhal's control since ${new Date(ctx.waitingSince ?? 0).toISOString()}, re-check at ${at}`
          : `retry ${ctx.attempts}/${ctx.retry.maxAttempts} at ${at}`;
      this.opts.log.warn(`${ctx.error.step ?? "step"} failed (${retry}): ${ctx.error.message}${ctx.error.fix ? ` Fix: ${ctx.error.fix}` : ""}`, { engine: name });
    } else this.opts.log.info(`${from || "(restored)"} → ${to}`, { engine: name });
  }

  /**
   * Drift: an engine recorded as running that is gone, that does not hold its API key as recorded
   * (serves /v1 without it, or its key file is missing or changed: at once, it is a security
   * promise), or that stays unhealthy (its /health not 200 on two resyncs in a row: vLLM answers
   * 503 once its engine core died), is restarted from a fresh run after a backoff; orphans are stopped.
   */
  async resync(): Promise<void> {
    for (const [name, actor] of this.actors) {
      const snap = actor.getSnapshot();
      // An engine no longer desired whose removal failed is asked again on every resync.
      if (!this.specs.has(name) && snap.value !== "removing" && snap.value !== "removed") actor.send({ type: "REMOVE" });
      const { handle, run } = snap.context;
      if (!handle) continue;
      if (!(await this.world.alive(handle))) {
        const reason = await this.world.lostReason(snap.context, this.secrets);
        this.opts.log.warn(`engine is gone (${reason}); restarting it from a fresh run after a backoff`, { engine: name });
        // Whatever is left of it (workers that outlived their leader, a dead container) goes first.
        await this.world.stop(handle).catch(() => undefined);
        actor.send({ type: "ENGINE_LOST", reason });
        continue;
      }
      if (snap.value !== "captured" || !run) continue;
      const key = await this.world.keyProblem(handle, run.dir);
      if (key !== null) {
        this.opts.log.warn(`engine does not hold its API key as recorded (${key}); stopping it and restarting from a fresh run`, { engine: name });
        await this.world.stop(handle).catch(() => undefined);
        actor.send({ type: "ENGINE_LOST", reason: `stopped: it does not hold its API key as recorded: ${key}` });
        continue;
      }
      const health = await this.world.health(run.dir);
      const strikes = health === null ? 0 : (this.unhealthy.get(name) ?? 0) + 1;
      this.unhealthy.set(name, strikes);
      if (strikes >= UNHEALTHY_STRIKES) {
        this.unhealthy.delete(name);
        this.opts.log.warn(`engine is alive but unhealthy (${health}); stopping it and restarting from a fresh run`, { engine: name });
        await this.world.stop(handle).catch(() => undefined);
        actor.send({ type: "ENGINE_LOST", reason: `unhealthy: ${health}` });
      }
    }
    await this.world.stopOrphans(await this.world.listOwned(), this.claimed());
  }

  private claimed(): Set<string> {
    const records = Object.values(this.store.data.engines);
    return claimedTokens(
      [...[...this.actors.values()].map((a) => a.getSnapshot().context), ...records.map((r) => (r.snapshot as { context?: EngineContext } | null)?.context)],
      records.map((r) => r.handle),
    );
  }

  private notify(): void {
    for (const w of this.settleWaiters) w();
  }

  settled(): boolean {
    for (const actor of this.actors.values()) {
      const s = actor.getSnapshot();
      // An actor that crashed (status "error") will not move again: settled, and reported by its phase.
      if (s.status === "active" && !isSettled(String(s.value), s.context)) return false;
    }
    return true;
  }

  /** Resolves when every actor is captured, removed or terminally failed. */
  waitSettled(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (this.settled() || signal?.aborted) {
          this.settleWaiters.delete(check);
          // Settled either way: a write that fails is logged where it failed and thrown by close().
          void this.store.flush().then(resolve, resolve);
        }
      };
      this.settleWaiters.add(check);
      signal?.addEventListener("abort", check, { once: true });
      check();
    });
  }
}
