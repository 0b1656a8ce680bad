// Executing a plan: one engine's actions, in order, through its actor. IO that
// must come first (stopping what is left of a lost engine, reading a run
// directory to adopt) is awaited before the actor is started or sent anything,
// and the events are then sent together, so a restored step never runs ahead of
// what observation found. Every action re-checks that it still applies (the
// latest plan wins; a stale one does nothing).
import { failureOf } from "../errors.js";
import { describeFailure } from "../errors.js";
import { specInputs } from "./desired-for-plan.js";
import type { EngineContext, EngineEvent } from "../../machines/engine.js";
import type { DesiredState, EngineSpec } from "../desired/types.js";
import type { StateStore } from "../state/store.js";
import type { Logger } from "../log.js";
import type { Failpoint } from "../failpoints.js";
import { recordFrom } from "./record.js";
import type { EngineActor, EngineActors, MadeActor } from "./engine-actors.js";
import type { Owned, World } from "./world.js";
import type { Action, Observed } from "./plan-types.js";
import { proofEnd, runProof, type KvIo } from "./kv-proofs.js";
import { PROOF_KEY } from "./plan-keys.js";
import type { ProofEnd } from "../phases/kv-proof.js";

/** Transitions that come from talking to the live engine. */
const OBSERVING = new Set(["started", "probed", "captured"]);

export interface ExecutionDeps {
  controller: { actors: Map<string, EngineActor>; applied: Map<string, EngineSpec> };
  makers: EngineActors;
  world: World;
  log: Logger;
  failpoint?: Failpoint;
  storeOf(): StateStore;
  desiredSpec(name: string): EngineSpec | undefined;
  owned(): Owned;
  /** After a transition is persisted (or its write failed and was logged). */
  onTransition(engine: string, from: string, to: string): void;
  /** A transition was seen and its onTransition will follow once its write settles (settled() waits for it). */
  transitionPending(): void;
  /** The proofs' IO and deadline; after a proof is recorded, `onProved` (the fleet is planned again). */
  kv: KvIo;
  kvTimeoutMs: number;
  onProved(decode: string): void;
}

export class Execution {
  /** Engines whose actor runs (subscribed and started). */
  private readonly started = new Set<string>();
  /** Actors made but not started yet: restored at startup, started when their key is executed. */
  private readonly made = new Map<string, MadeActor>();
  /** Recorded engines whose snapshot this machine cannot take: planned as if unrecorded (adopted or created). */
  readonly unrestorable = new Set<string>();
  private restored = false;
  /** What restoreAll restored, until it is said. */
  private restoredLine: string | null = null;
  private readonly inputs = new WeakMap<EngineSpec, Record<string, unknown>>();

  constructor(private readonly deps: ExecutionDeps) {}

  isStarted(name: string): boolean {
    return this.started.has(name);
  }

  /**
   * Whether a restored actor must be started although the plan gives it nothing to do: it resumes a
   * step, a backoff or an adoption. A captured one does nothing until it is sent an event (its key
   * starts it then, run()): left unstarted, a no-op of N captured engines does not subscribe, start and
   * re-write N records that did not change (about 0.4 ms an engine).
   */
  needsStart(name: string): boolean {
    const made = this.made.get(name);
    return !!made && (!made.restored || String(made.actor.getSnapshot().value) !== "captured");
  }

  /** The hashed inputs of a spec (no secrets), computed once per spec. */
  inputsOf(spec: EngineSpec): Record<string, unknown> {
    let material = this.inputs.get(spec);
    if (!material) this.inputs.set(spec, (material = specInputs(spec)));
    return material;
  }

  /**
   * The running instance of `name` as a proof names it (null: none runs). Its node is named only when
   * the controller reaches it over ssh: nodes without an ssh block are all the controller's own host,
   * where a loopback side channel reaches every engine.
   */
  proofEndOf(name: string): ProofEnd | null {
    const { actors, applied } = this.deps.controller;
    const ctx = actors.get(name)?.getSnapshot().context as EngineContext | undefined;
    const node = applied.get(name)?.node;
    return proofEnd(name, ctx, node?.ssh ? node.name : null);
  }

  /**
   * Once, before the first observation: an actor (not started) for every recorded engine whose snapshot
   * can be restored. `say`: log what was restored (once); a preview (apply's check of a saved plan, whose
   * refusal may be the command's only output) restores without saying it.
   */
  async restoreAll(desired: DesiredState, say = false): Promise<void> {
    if (!this.restored) await this.restoreOnce(desired);
    if (say && this.restoredLine) {
      this.deps.log.info(this.restoredLine);
      this.restoredLine = null;
    }
  }

  private async restoreOnce(desired: DesiredState): Promise<void> {
    this.restored = true;
    const store = this.deps.storeOf();
    // Every record's evidence is read side by side (three small files an engine), then restored in order.
    const joined = await Promise.all(Object.values(store.data.engines).map((r) => store.withEvidence(r)));
    const specs = new Map(desired.specs.map((s) => [s.name, s]));
    const phases = new Map<string, number>();
    for (const { record, problem } of joined) {
      const made = this.deps.makers.restore(record, problem);
      const spec = specs.get(record.engine);
      if (made) {
        const snap = made.actor.getSnapshot();
        const phase = String(snap.value);
        phases.set(phase, (phases.get(phase) ?? 0) + 1);
        // A restored engine runs its steps from the spec it was applied with; that is the desired one when the hashes agree.
        if (spec && spec.input_hash === snap.context.desiredHash) this.deps.controller.applied.set(record.engine, spec);
        this.register(record.engine, made);
      } else if (spec) this.unrestorable.add(record.engine);
      else {
        // Not desired and not restorable: what runs of it is an orphan (swept), and its record would only mislead status.
        this.deps.log.warn(
          `dropping the record of ${record.engine}: not desired, and its snapshot cannot be restored`,
          { engine: record.engine },
        );
        await store.update(record.engine, () => null);
      }
    }
    // One line for them all: a no-op of 1000 engines printed a "(restored) → captured" line for each.
    const restored = [...phases.values()].reduce((a, b) => a + b, 0);
    if (restored)
      this.restoredLine = `restored ${restored} engine${restored === 1 ? "" : "s"} from the state: ${[...phases]
        .map(([phase, n]) => `${n} ${phase}`)
        .join(", ")}`;
  }

  /**
   * Tell every running actor what `narwhal suspend` now records for it: a suspended engine is observed,
   * never changed, so its machine's backoff timer must hold it (and resume re-arms it from its deadline).
   */
  syncSuspension(): void {
    const suspended = this.deps.storeOf().suspended();
    for (const name of this.started) this.tellSuspension(name, suspended);
  }

  private tellSuspension(name: string, suspended: Record<string, string>): void {
    const actor = this.deps.controller.actors.get(name);
    const on = Object.hasOwn(suspended, name);
    if (actor && !!actor.getSnapshot().context.suspended !== on) actor.send({ type: "SUSPENSION", suspended: on });
  }

  private register(name: string, made: MadeActor): void {
    this.deps.controller.actors.set(name, made.actor);
    this.made.set(name, made);
  }

  /** Execute one queue key's actions (an engine name, `orphan:<token>`, or a decode's `kv:<decode>`). */
  async run(key: string, actions: Action[], observed: Observed | null, signal: AbortSignal): Promise<void> {
    if (key.startsWith("orphan:")) return this.sweep(actions);
    if (key.startsWith(PROOF_KEY)) return this.prove(key.slice(PROOF_KEY.length), actions, observed, signal);
    const name = key;
    const { controller, world, log } = this.deps;
    const events: EngineEvent[] = [];
    for (const a of actions) {
      const actor = controller.actors.get(name);
      const ctx = actor?.getSnapshot().context as EngineContext | undefined;
      const phase = actor ? String(actor.getSnapshot().value) : null;
      switch (a.kind) {
        case "create":
        case "adopt": {
          const spec = this.deps.desiredSpec(name);
          if (actor || !spec) break;
          const made =
            (a.kind === "adopt" ? await this.deps.makers.adopt(name, spec.input_hash, this.deps.owned()) : null) ??
            this.deps.makers.fresh(name, spec.input_hash);
          controller.applied.set(name, spec);
          this.unrestorable.delete(name);
          this.register(name, made);
          break;
        }
        case "restart-lost":
        case "restart-unproven": {
          const handle = ctx?.handle;
          // Only the instance the plan judged (found gone, without its key or unhealthy; or unproven while it
          // serves): never one started since.
          if (!handle || observed?.engines[name]?.handle?.launch_token !== handle.launch_token) break;
          if (a.kind === "restart-unproven" && phase !== "captured") break;
          log.warn(
            a.kind === "restart-lost"
              ? `${a.reason}; stopping what is left of it and restarting it from a fresh run after a backoff`
              : `${a.reason}; stopping it and restarting it from a fresh run`,
            { engine: name },
          );
          // Whatever is left of it (workers that outlived their leader, a dead container) goes first.
          await world.stop(handle).catch(() => undefined);
          events.push({ type: "ENGINE_LOST", reason: a.reason });
          break;
        }
        case "replace": {
          const spec = this.deps.desiredSpec(name);
          if (!spec || spec.input_hash !== a.to_hash || !actor) break; // desired moved on: a newer plan follows
          controller.applied.set(name, spec);
          events.push({ type: "DESIRED_CHANGED", desiredHash: spec.input_hash });
          break;
        }
        case "retry":
          if (phase === "failed" && ctx?.terminal) events.push({ type: "RETRY" });
          break;
        case "remove":
          // One removal at a time: never a second REMOVE to an engine already being removed.
          if (actor && phase !== "removing" && phase !== "removed" && !ctx?.deferred?.remove)
            events.push({ type: "REMOVE" });
          break;
        case "forget-retiring":
          if (ctx?.retiring) {
            log.warn(a.reason, { engine: name });
            events.push({ type: "RETIRING_LOST" });
          }
          break;
        case "prove": // under its own key (plan-keys.ts), never here
        case "sweep-orphan":
        case "wait":
          break;
      }
    }
    const actor = controller.actors.get(name);
    if (!actor) return;
    const made = this.made.get(name);
    if (made) this.begin(name, made);
    for (const e of events) actor.send(e);
  }

  /**
   * A decode's proofs, one prefill at a time, each only while both ends are captured. The engines' own
   * keys run meanwhile: a failure of an end that moved on during its proof is not recorded (`current`).
   */
  private async prove(name: string, actions: Action[], observed: Observed | null, signal: AbortSignal) {
    const captured = (engine: string) =>
      String(this.deps.controller.actors.get(engine)?.getSnapshot().value) === "captured";
    const current = async (end: ProofEnd) => {
      if (!captured(end.engine) || this.proofEndOf(end.engine)?.launch_token !== end.launch_token) return false;
      // An end killed during the proof, before an observation saw it (its request refused): no finding either.
      const ctx = this.deps.controller.actors.get(end.engine)?.getSnapshot().context as EngineContext | undefined;
      return !ctx?.handle || (await this.deps.world.observeLiveness(ctx.handle)).liveness !== "gone";
    };
    for (const a of actions) {
      if (a.kind !== "prove" || signal.aborted || !captured(name) || !captured(a.prefill)) continue; // a newer plan follows
      const ends = { prefill: this.proofEndOf(a.prefill), decode: this.proofEndOf(name) };
      const { kv: io, kvTimeoutMs: timeoutMs, log, failpoint } = this.deps;
      const store = this.deps.storeOf();
      if (await runProof(a, ends, observed, { io, store, log, timeoutMs, failpoint, signal, current }))
        this.deps.onProved(name);
    }
  }

  private async sweep(actions: Action[]): Promise<void> {
    await Promise.all(
      actions.map(async (a) => {
        if (a.kind !== "sweep-orphan") return;
        this.deps.log.warn(`stopping orphaned engine (launch token ${a.launch_token.slice(0, 8)}): ${a.reason}`, {
          engine: a.engine,
        });
        await this.deps.world
          .stop(a.handle)
          .catch((err) => this.deps.log.error(`cannot stop orphan: ${(err as Error).message}`, { engine: a.engine }));
      }),
    );
  }

  /** Subscribe (persisting every transition), start, and resume what a snapshot cannot resume by itself. */
  private begin(name: string, made: MadeActor): void {
    const { actor } = made;
    const { controller, log } = this.deps;
    this.made.delete(name);
    this.started.add(name);
    let lastPhase = "";
    // The phase its record holds: a restored actor's first snapshot in that phase restores it where the plan
    // that started it already saw it, so it asks for no plan (a no-op of N engines planned N times over).
    // Not an adopted one's: the plan saw that engine unrecorded, and its peers' KV verdicts wait on a plan
    // that sees it captured (a decode restored beside its rebuilt prefill kept NoPeer, and --once exited 2).
    const recorded = made.restored ? this.deps.storeOf().engine(name)?.phase : undefined;
    actor.subscribe({
      next: (snap) => {
        const phase = String(snap.value);
        const spec = controller.applied.get(name);
        const written = this.deps
          .storeOf()
          .update(name, (prev) =>
            phase === "removed"
              ? null
              : {
                  ...recordFrom(
                    prev,
                    phase,
                    snap.context,
                    spec?.backend ?? prev?.backend ?? "native",
                    actor.getPersistedSnapshot(),
                  ),
                  ...(spec
                    ? { role: spec.role, applied_inputs: this.inputsOf(spec) }
                    : { role: prev?.role, applied_inputs: prev?.applied_inputs ?? null }),
                  // Reaching started, probed or captured is itself an observation: the step just talked to the engine.
                  // Not an actor's first snapshot, which only restores where it was (the observation stamped it).
                  ...(OBSERVING.has(phase) && lastPhase !== ""
                    ? { observed_at: new Date().toISOString() }
                    : prev?.observed_at
                      ? { observed_at: prev.observed_at }
                      : {}),
                  halted: prev?.halted ?? null,
                },
          )
          .catch((err) => log.error(`cannot write the state file: ${describeFailure(err)}`, { engine: name }));
        if (phase === lastPhase) return;
        this.deps.failpoint?.(`transition:${phase}`);
        this.logTransition(name, lastPhase, phase, snap.context);
        const from = lastPhase;
        lastPhase = phase;
        if (from === "" && phase === recorded) return;
        this.deps.transitionPending();
        if (phase === "removed") {
          controller.actors.delete(name);
          controller.applied.delete(name);
          this.started.delete(name);
        }
        void written.then(() => this.deps.onTransition(name, from, phase));
      },
      error: (err) => {
        log.error(`engine actor crashed: ${String(err)}`, { engine: name });
        this.deps.onTransition(name, lastPhase, "error");
      },
    });
    actor.start();
    // A snapshot's suspension may be stale (resumed with no controller running): the state's is the one.
    this.tellSuspension(name, this.deps.storeOf().suspended());
    const snap = actor.getSnapshot();
    if (made.adopted || (made.restoredFailed && !snap.context.terminal)) actor.send({ type: "RESUME" });
  }

  private logTransition(name: string, from: string, to: string, ctx: EngineContext): void {
    if (to === "failed" && ctx.error) {
      const at = new Date(ctx.retryAt ?? 0).toISOString();
      const retry = ctx.terminal
        ? "terminal"
        : failureOf(ctx.error) === "outwait"
          ? `outwaiting a cause outside narwhal's control since ${new Date(ctx.waitingSince ?? 0).toISOString()}, re-check at ${at}`
          : `retry ${ctx.attempts}/${ctx.retry.maxAttempts} at ${at}`;
      this.deps.log.warn(
        `${ctx.error.step ?? "step"} failed (${retry}): ${ctx.error.message}${ctx.error.fix ? ` Fix: ${ctx.error.fix}` : ""}`,
        { engine: name },
      );
    } else if (from) this.deps.log.info(`${from} → ${to}`, { engine: name });
    else this.deps.log.debug(`(restored) → ${to}`, { engine: name }); // restoreAll says it once for all
  }
}
