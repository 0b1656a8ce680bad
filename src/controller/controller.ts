// The controller: observe → plan → execute, through one keyed work queue.
// The fleet key observes every engine and what runs, asks the pure planner what
// to do (planner.ts), writes the serving fleet, and queues each engine's
// actions under the engine's own key; an engine key executes them through that
// engine's actor (execute.ts). Reloads, resyncs and every engine transition
// only request the fleet key, so they coalesce: nothing piles up behind a hung
// daemon, nothing is decided inside an await of another decision.
import { isSettled } from "../../machines/engine.js";
import type { DesiredState, EngineSpec } from "../desired/types.js";
import type { StateStore } from "../state/store.js";
import type { StateLock } from "../state/lock.js";
import { openState } from "./open-state.js";
import { describeFailure, ioFailure, type NodeFault } from "../errors.js";
import { World, type Owned } from "./world.js";
import { EngineActors, type EngineActor } from "./engine-actors.js";
import { desiredHashes, handleTokens, observe } from "./observe.js";
import { knownEngines, markObserved } from "./known-engines.js";
import { plan as planFleet } from "./planner.js";
import { desiredForPlan } from "./desired-for-plan.js";
import { Execution } from "./execute.js";
import { WorkQueue } from "./work-queue.js";
import { ServingWriter } from "./serving-writer.js";
import { LaunchConfigWriter } from "./launch-config-writer.js";
import { DesiredSummaryWriter } from "./desired-summary-writer.js";
import { Generations } from "./generations.js";
import { SettleWaiters } from "./settle-waiters.js";
import type { Action, DesiredForPlan, Liveness, Observed, Plan } from "./plan-types.js";
import { keyedActions, PROOF_KEY } from "./plan-keys.js";
import { providedMachine, retryPolicy, type ControllerOptions } from "./controller-options.js";
import { DecodeScrapes, type KvIo } from "./kv-proofs.js";
import { proveKvTransfer } from "../phases/kv-proof.js";
import { scrapeKvCounters } from "../phases/kv-watch.js";
import { applyRequest, type RequestResult } from "./operator-requests.js";
import type { OperatorRequest } from "../state/requests.js";
import { observedKv, timed } from "./observer.js";
import type { EngineRecord } from "../state/store.js";

export { retryPolicy, type ControllerHooks, type ControllerOptions } from "./controller-options.js";

/** Differences that refuse a plan before it is executed (empty: execute it). */
export type PlanGuard = (observed: Observed, plan: Plan) => string[];

/** The queue key of the fleet's observe-and-plan; engine keys are engine names. */
const FLEET = "~fleet";
/** The queue key of the watch mode's scrape of the serving decodes' KV metrics. */
const KV_WATCH = "~kv-watch";

export class Controller {
  private store!: StateStore;
  private lock!: StateLock;
  readonly actors = new Map<string, EngineActor>();
  /** The spec each actor was last given: its steps run from it, whatever desired/ says meanwhile (a held rollout). */
  readonly applied = new Map<string, EngineSpec>();
  private desired: DesiredState | null = null;
  // Settled either way: a state write that fails is logged where it failed and thrown by close().
  private readonly settling = new SettleWaiters(
    () => this.settled(),
    () => this.store.flush(),
  );
  private readonly world: World;
  private readonly queue: WorkQueue;
  private readonly execution: Execution;
  /** The next fleet reconcile probes every engine and lists what runs (startup, resync). */
  private fullPending = true;
  private startup = true;
  private lastObserved: Observed | null = null;
  private lastOwned: Owned = [];
  private lastPlan: Plan | null = null;
  private readonly serving: ServingWriter;
  private readonly launchConfig: LaunchConfigWriter;
  private readonly summary: DesiredSummaryWriter;
  private readonly fleetRuns = new Generations();
  private readonly liveness = new Map<string, Liveness>();
  /** The node faults behind "unknown" liveness, by launch token (NodeReachable, the planner). */
  private readonly nodeFaults = new Map<string, NodeFault>();
  private readonly strikes = new Map<string, number>();
  private readonly scrapes: DecodeScrapes;
  /** Transitions seen whose onTransition (and so their fleet plan) has not run yet. */
  private unplanned = 0;
  private guard: PlanGuard | null = null;
  private planned: { desired: DesiredState; view: DesiredForPlan } | null = null;
  /** Why a guarded plan was not executed (null: it was, or there was no guard). */
  refused: string[] | null = null;
  /** Actions the last plan gave each queue key, waiting for that key's turn (the latest plan wins). */
  private readonly pending = new Map<string, Action[]>();
  /** Engines `narwhal retry` asked a fresh attempt for: marked on the next observation, then forgotten. */
  private readonly retries = new Set<string>();

  constructor(private readonly opts: ControllerOptions) {
    // The KV proofs' and scrapes' IO (src/phases).
    const kv: KvIo = observedKv({ prove: proveKvTransfer, scrape: scrapeKvCounters }, opts.observer);
    this.scrapes = new DecodeScrapes({ io: kv, log: opts.log, timeoutMs: opts.config.kvProofTimeoutMs });
    this.world = new World(opts.backends, opts.log, opts.config.stopGraceMs, {
      hosts: opts.hosts,
      stateDir: opts.config.stateDir,
    });
    this.serving = new ServingWriter(opts.config.stateDir, opts.log, (fleet) => opts.hooks?.serving?.(fleet));
    this.summary = new DesiredSummaryWriter(opts.config.stateDir, opts.log);
    this.launchConfig = new LaunchConfigWriter(opts.config.stateDir, opts.log, () =>
      Object.values(this.store.data.engines),
    );
    const machine = providedMachine(opts, {
      applied: this.applied,
      actors: this.actors,
      persisted: () => this.store.flush(),
      servingSettled: () => this.fleetPlannedAfterNow(),
      secrets: () => this.desired?.secrets ?? [],
    });
    this.execution = new Execution({
      controller: this,
      makers: new EngineActors(machine, retryPolicy(opts.config, opts.mode), opts.log),
      world: this.world,
      log: opts.log,
      failpoint: opts.failpoint,
      storeOf: () => this.store,
      desiredSpec: (name) => this.desired?.specs.find((s) => s.name === name),
      owned: () => this.lastOwned,
      onTransition: (engine, from, to) => this.onTransition(engine, from, to),
      transitionPending: () => void this.unplanned++,
      kv,
      kvTimeoutMs: opts.config.kvProofTimeoutMs,
      onProved: () => this.queue.add(FLEET),
    });
    // A failed reconcile (a daemon that errors, a state write that fails) is retried soon, and at
    // most a resync period apart: as often as drift is looked for anyway.
    const retryBaseMs = Math.max(1, Math.min(1000, opts.config.retry.baseMs));
    this.queue = new WorkQueue(
      (key, signal) =>
        timed(opts.observer, key === FLEET ? "fleet" : key === KV_WATCH ? "kv-watch" : "engine", () =>
          key === FLEET
            ? this.reconcileFleet(signal)
            : key === KV_WATCH
              ? this.scrapeDecodes(signal)
              : this.reconcileKey(key, signal),
        ),
      {
        concurrency: opts.concurrency ?? opts.config.queue.concurrency,
        // The fleet's observe-and-plan never waits for a slot (a save is planned while every slot
        // runs a step), and KV proofs and scrapes have slots of their own beside the engines' steps.
        lane: (key) => (key === FLEET ? null : key === KV_WATCH || key.startsWith(PROOF_KEY) ? "kv" : ""),
        retry: { baseMs: retryBaseMs, capMs: Math.max(retryBaseMs, opts.config.watch.resyncMs) },
        onError: (key, err, failures) =>
          this.opts.log.error(
            `reconcile of ${key === FLEET ? "the fleet" : key} failed (${failures} in a row; retried with backoff): ${describeFailure(err)}`,
          ),
      },
    );
  }

  async open(): Promise<void> {
    ({ lock: this.lock, store: this.store } = await openState(
      this.opts.config.stateDir,
      this.opts.log,
      this.opts.failpoint,
      this.opts.observer && ((seconds, ok) => this.opts.observer?.stateWritten(seconds, ok)),
    ));
    // Never throws: an unreadable serving-fleet.json is rewritten from the first plan.
    await this.serving.load();
  }

  /**
   * Stop taking work, let running work settle for the shutdown grace (or abandon it at its next
   * await), stop the actors (engines keep running), flush state, release the lock. A final write
   * that fails is thrown (an IoError naming the path and errno): the state on disk is not what happened.
   */
  async close(): Promise<void> {
    await this.queue.shutdown(this.opts.config.queue.shutdownGraceMs);
    for (const actor of this.actors.values()) actor.stop();
    this.actors.clear();
    await this.opts.hosts.close();
    try {
      await this.store?.close();
      if (this.store) {
        const { made, skipped } = this.store.writes;
        this.opts.log.debug(`state: ${made} write${made === 1 ? "" : "s"}, ${skipped} unchanged not written`);
      }
      // Each fleet plan costs O(engines + pairs): how many a run made says whether it planned only when something moved.
      this.opts.log.debug(`fleet planned ${this.fleetRuns.count} time${this.fleetRuns.count === 1 ? "" : "s"}`);
      await this.serving.written();
      await this.launchConfig.written();
      await this.summary.written();
    } catch (err) {
      throw ioFailure(err, {
        step: "state",
        fix: `The state file could not be written, so the last transitions are not recorded: make ${this.opts.config.stateDir} writable, then run reconcile again (it rebuilds from what runs).`,
      });
    } finally {
      await this.lock?.release();
    }
  }

  /**
   * A new (valid) desired state: plan against it (queued; waitSettled or waitIdle say when it took
   * effect). With a guard, the next plan is executed only if the guard finds no difference (apply
   * of a saved plan); otherwise nothing is executed and `refused` says why.
   */
  apply(desired: DesiredState, guard?: PlanGuard): void {
    this.desired = desired;
    this.summary.applied(desired);
    this.guard = guard ?? null;
    this.opts.log.addSecrets(desired.secrets);
    for (const backend of Object.values(this.opts.backends)) backend.knowHosts?.(desired.specs);
    this.queue.add(FLEET);
  }

  /** Drift: observe every engine and what runs (liveness, API key, health), then plan. Coalesced with any pending request. */
  resync(): void {
    this.fullPending = true;
    this.queue.add(FLEET);
  }

  /**
   * Watch mode's cheap check that KV still moves: scrape every decode the serving fleet pairs
   * (queued: never beside a plan's own decisions). Seconds between scrapes: kvWatchIntervalMs.
   */
  scrapeKv(): void {
    if (this.kvWatchIntervalMs() > 0) this.queue.add(KV_WATCH);
  }

  /** kv_transfer.watch_interval_s of the desired state, in ms (0: off, no P/D proofs, or no desired state yet). */
  kvWatchIntervalMs(): number {
    const kv = this.desired?.kv;
    return kv?.prove ? kv.watch_interval_s * 1000 : 0;
  }

  private async scrapeDecodes(signal: AbortSignal): Promise<void> {
    const ends = (engine: string) => this.execution.proofEndOf(engine);
    if (await this.scrapes.run(this.serving.current, this.lastObserved, ends, this.store, signal))
      this.queue.add(FLEET);
  }

  /** Observe and plan against `desired`, acting on nothing (apply of a saved plan compares it first). */
  async preview(desired: DesiredState): Promise<{ observed: Observed; plan: Plan }> {
    this.opts.log.addSecrets(desired.secrets);
    for (const backend of Object.values(this.opts.backends)) backend.knowHosts?.(desired.specs);
    if (this.startup) await this.execution.restoreAll(desired);
    const observed = await this.observeNow(true, desired);
    return {
      observed,
      plan: planFleet(this.forPlan(desired), observed, { rollout: desired.rollout, startup: this.startup }),
    };
  }

  /** The planner's view of a desired state, computed once per desired state (every transition plans). */
  private forPlan(desired: DesiredState): DesiredForPlan {
    if (this.planned?.desired !== desired)
      this.planned = { desired, view: desiredForPlan(desired, (s) => this.execution.inputsOf(s)) };
    return this.planned.view;
  }

  private async observeNow(full: boolean, desired: DesiredState): Promise<Observed> {
    // A listing answers for the handles that existed when it was asked for. Judged by a handle a start recorded
    // while it was taken, a container that start had created but not yet started (listed not running) was a
    // healthy engine found "exited", stopped and restarted (watch mode, containers: a resync that met a start).
    // The engines themselves are taken after it: a process it lists was started by an engine known by then
    // (claimed, not an orphan to stop).
    const listedFor = full
      ? handleTokens(knownEngines(this.actors, this.applied, this.execution, this.store))
      : undefined;
    const owned = full ? await this.world.listOwned(this.startup) : null;
    if (owned) this.lastOwned = owned;
    const known = knownEngines(this.actors, this.applied, this.execution, this.store);
    return observe(this.world, known, this.lastObserved?.owned ?? [], {
      probe: full,
      key: full,
      ...(listedFor ? { listedFor } : {}),
      // Health counts strikes across resyncs: one unhealthy answer at startup is not yet a verdict.
      health: full && !this.startup,
      owned,
      cache: this.liveness,
      faults: this.nodeFaults,
      strikes: this.strikes,
      secrets: desired.secrets,
      inputs: { desiredHash: desiredHashes(desired), read: (value) => this.store.appliedInputs(value) },
      serving: this.serving.current,
      proofs: this.store.proofs(),
      atStart: this.startup,
      suspended: this.store.suspended(),
      retry: this.retries,
    });
  }

  /**
   * Resolves once a fleet reconcile that began after this call has completed and its serving
   * fleet is written: everything that happened before the call is reflected in serving-fleet.json.
   */
  private async fleetPlannedAfterNow(): Promise<void> {
    if (this.queue.closed) return;
    const planned = this.fleetRuns.next();
    this.queue.add(FLEET);
    await planned;
    await this.serving.written();
  }

  private async reconcileFleet(signal: AbortSignal): Promise<void> {
    const run = this.fleetRuns.begin();
    try {
      await this.planFleet(signal);
    } finally {
      this.fleetRuns.end(run);
    }
  }

  private async planFleet(signal: AbortSignal): Promise<void> {
    const desired = this.desired;
    if (!desired) return;
    if (this.startup) await this.execution.restoreAll(desired, true);
    const full = this.fullPending;
    this.fullPending = false;
    const observed = await this.observeNow(full, desired);
    if (signal.aborted) return;
    const plan = planFleet(this.forPlan(desired), observed, { rollout: desired.rollout, startup: this.startup });
    this.retries.clear();
    const guard = this.guard;
    this.guard = null;
    const refused = guard?.(observed, plan) ?? [];
    if (refused.length > 0) {
      this.refused = refused;
      this.notify();
      return;
    }
    this.lastObserved = observed;
    this.lastPlan = plan;
    if (markObserved(this.store, observed, plan, full, desired.kv.prove)) {
      await this.store
        .flush()
        .catch((err) => this.opts.log.error(`cannot write the state file: ${describeFailure(err)}`));
    }
    this.serving.write(plan.serving);
    const isStarted = (key: string) => this.execution.isStarted(key);
    const byKey = keyedActions(
      plan.actions,
      [...this.actors.keys()].filter((n) => this.execution.needsStart(n)),
      isStarted,
    );
    // The latest plan wins: what an older plan asked for and no key has executed yet is dropped.
    for (const key of this.pending.keys()) if (!byKey.has(key)) this.pending.delete(key);
    for (const [key, actions] of byKey) {
      this.pending.set(key, actions);
      this.queue.add(key);
    }
    this.startup = false;
    void this.queue.idle().then(() => this.notify());
  }

  /** An operator's suspend, resume or retry (operator-requests.ts): applied, planned on, one result per engine. */
  request(req: OperatorRequest): Promise<RequestResult[]> {
    return applyRequest(
      {
        store: this.store,
        known: () => [...(this.desired?.specs.map((s) => s.name) ?? []), ...Object.keys(this.store.data.engines)],
        actor: (engine) => {
          const s = this.actors.get(engine)?.getSnapshot();
          return s ? { phase: String(s.value), terminal: !!(s.context as { terminal?: boolean }).terminal } : null;
        },
        retries: this.retries,
        suspensionChanged: () => this.execution.syncSuspension(),
        replan: async () => {
          await this.fleetPlannedAfterNow();
          await this.queue.idle();
        },
      },
      req,
    );
  }

  private async reconcileKey(key: string, signal: AbortSignal): Promise<void> {
    const actions = this.pending.get(key) ?? [];
    this.pending.delete(key);
    if (signal.aborted) return;
    await this.execution.run(key, actions, this.lastObserved, signal);
    this.notify();
  }

  private onTransition(engine: string, from: string, to: string): void {
    if (to !== "error") this.unplanned--;
    this.launchConfig.transitioned(to);
    this.opts.hooks?.transition?.(engine, from, to);
    this.opts.observer?.transition(engine, from, to);
    // Every transition may release the next rollout step or change what may be paired.
    this.queue.add(FLEET);
    this.notify();
  }

  private notify(): void {
    this.settling.notify();
  }

  /**
   * How many state writes changed a record, a proof or the suspensions (not only when engines were
   * observed): watch mode's retention has nothing new to decide while it stays the same.
   */
  stateChanges(): number {
    return this.store.writes.changed;
  }

  /** Nothing queued or running, every actor settled, and no rollout step still to run. */
  settled(): boolean {
    if (this.refused) return true;
    if (this.queue.depth > 0 || this.queue.running > 0 || this.pending.size > 0 || this.lastPlan === null) return false;
    // A transition whose write has not settled yet has not asked for its plan (which may prove a pair) yet.
    if (this.unplanned > 0) return false;
    if (this.lastPlan.rollout.some((s) => s.status !== "halted")) return false;
    for (const actor of this.actors.values()) {
      const s = actor.getSnapshot();
      // An actor that crashed (status "error") will not move again: settled, and reported by its phase.
      if (s.status === "active" && !isSettled(String(s.value), s.context)) return false;
    }
    return true;
  }

  /** The engines the state records (empty before open()): what the metrics' gauges count. */
  records(): EngineRecord[] {
    return this.store ? Object.values(this.store.data.engines) : [];
  }

  /** Work-queue keys waiting, running, and scheduled for later (backoff). */
  queueDepth(): { pending: number; running: number; delayed: number } {
    return { pending: this.queue.depth, running: this.queue.running, delayed: this.queue.delayed };
  }

  /** The last observation the controller planned on (null: none yet). */
  get observed(): Observed | null {
    return this.lastObserved;
  }

  /** Resolves when the work queue has nothing pending or running (actors may still run steps). */
  waitIdle(): Promise<void> {
    return this.queue.idle();
  }

  /** Resolves when every actor is captured, removed or terminally failed and no rollout step is left. */
  waitSettled(signal?: AbortSignal): Promise<void> {
    return this.settling.wait(signal);
  }
}
