// Making engine actors: restored from a persisted snapshot, adopted from what
// runs (no usable snapshot), or fresh. None is started here: the controller
// observes first, plans, and starts an actor only when it executes that plan,
// so a restored step never acts on an engine that is gone.
import { createActor, type Actor, type Snapshot } from "xstate";
import { engineMachine, notWaiting, type EngineContext, type RetryPolicy } from "../../machines/engine.js";
import type { EngineRecord } from "../state/store.js";
import type { Logger } from "../log.js";
import { adoptFromRun } from "./adopt.js";
import type { Owned } from "./world.js";

export type EngineMachineProvided = ReturnType<typeof engineMachine.provide>;
export type EngineActor = Actor<EngineMachineProvided>;

export interface MadeActor {
  actor: EngineActor;
  /** Built from observation: its current step must be invoked anew (RESUME). */
  adopted: boolean;
  /**
   * From its state record's snapshot: its first snapshot is where the plan that started it already saw
   * it. An adopted or fresh actor is not: the plan saw its engine unrecorded, whatever its record says.
   */
  restored: boolean;
  /** Restored from a snapshot in `failed`: the backoff timer must be re-armed (RESUME). */
  restoredFailed: boolean;
}

export class EngineActors {
  constructor(
    private readonly machine: EngineMachineProvided,
    private readonly retry: RetryPolicy,
    private readonly log: Logger,
  ) {}

  fresh(engine: string, desiredHash: string): MadeActor {
    return {
      actor: createActor(this.machine, { input: { engine, desiredHash, retry: this.retry } }),
      adopted: false,
      restored: false,
      restoredFailed: false,
    };
  }

  /**
   * From the state record's snapshot; null when this machine cannot take it (another version, a hand
   * edit, evidence its run directory no longer holds: `unreadable`, why).
   */
  restore(record: EngineRecord, unreadable: string | null = null): MadeActor | null {
    const snapshot = record.snapshot as
      (Snapshot<unknown> & { context?: Partial<EngineContext>; value?: unknown }) | null | undefined;
    if (!snapshot) return null;
    const value = snapshot.value;
    const problem =
      unreadable ??
      (typeof value !== "string" || !(value in this.machine.states)
        ? `unknown state ${JSON.stringify(value)}`
        : !snapshot.context
          ? "no context"
          : null);
    try {
      if (problem) throw new Error(problem);
      // The retry policy is this controller's configuration, not history: a restored actor takes the
      // current one, and an outwait streak counts from this controller's start (--once bounds it).
      Object.assign(snapshot.context!, { retry: this.retry, ...notWaiting });
      const actor = createActor(this.machine, {
        snapshot,
        input: { engine: record.engine, desiredHash: record.desired_hash, retry: this.retry },
      });
      if (actor.getSnapshot().status !== "active") throw new Error(`restored as ${actor.getSnapshot().status}`);
      return { actor, adopted: false, restored: true, restoredFailed: value === "failed" };
    } catch (err) {
      this.log.warn(
        `could not restore ${record.engine}'s snapshot (${(err as Error).message}); rebuilding it from what runs`,
        { engine: record.engine },
      );
      return null;
    }
  }

  /** From an engine this state directory runs for `engine`; prefers one that serves the current inputs. */
  async adopt(engine: string, desiredHash: string, owned: Owned): Promise<MadeActor | null> {
    const candidates = [];
    for (const o of owned.filter((x) => x.owned.engine === engine)) {
      const adopted = await adoptFromRun(o.owned, engine, desiredHash, this.retry);
      if (adopted) candidates.push(adopted);
    }
    candidates.sort((a, b) => Number(a.context.retiring !== null) - Number(b.context.retiring !== null));
    const adopted = candidates[0];
    if (!adopted) return null;
    this.log.warn(
      `no usable state recorded; adopting the running engine from ${adopted.context.run?.dir ?? adopted.context.retiring?.run?.dir} at ${adopted.value}`,
      { engine },
    );
    const snapshot = this.machine.resolveState(adopted) as unknown as Snapshot<unknown>;
    return {
      actor: createActor(this.machine, { snapshot, input: { engine, desiredHash, retry: this.retry } }),
      adopted: true,
      restored: false,
      restoredFailed: false,
    };
  }
}
