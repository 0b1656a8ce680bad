// Between the controller's engines and the observation: what it knows of each
// engine, as observe() takes it, and what an observation adds to the state
// records (when each engine was last observed, which rollout halted on it).
import type { EngineContext } from "../../machines/engine.js";
import type { EngineSpec } from "../desired/types.js";
import type { Condition, StateStore } from "../state/store.js";
import type { EngineActor } from "./engine-actors.js";
import type { Execution } from "./execute.js";
import type { KnownEngine } from "./observe.js";
import type { Observed, ObservedEngine, Plan } from "./plan-types.js";
import { conditionBuilder, withNodeReachable, type NodeEvidence } from "./record.js";
import { KV_CONDITION, kvVerdicts } from "./kv-condition.js";

/** Every engine with an actor, started or not, with the spec it was applied with. */
export function knownEngines(
  actors: ReadonlyMap<string, EngineActor>,
  applied: ReadonlyMap<string, EngineSpec>,
  execution: Pick<Execution, "unrestorable" | "isStarted" | "inputsOf">,
  store: StateStore,
): KnownEngine[] {
  return [...actors].map(([engine, actor]) => {
    const snap = actor.getSnapshot();
    const spec = applied.get(engine);
    return {
      engine,
      phase: String(snap.value),
      context: snap.context as EngineContext,
      // A record whose snapshot could not be restored does not speak for the engine (it is planned as unrecorded).
      record: execution.unrestorable.has(engine) ? undefined : store.engine(engine),
      has_actor: execution.isStarted(engine),
      ...(spec ? { role: spec.role, applied_inputs: execution.inputsOf(spec) } : {}),
    };
  });
}

/**
 * Mark the records with this observation; true when any record changed (the caller flushes).
 * `prove`: the fleet proves its P/D pairs (kv_transfer.prove), so each prefill and decode record
 * carries the KVTransfer verdict of this plan.
 */
export function markObserved(store: StateStore, observed: Observed, plan: Plan, full: boolean, prove = false): boolean {
  const halted = new Map(plan.halted.map((h) => [h.engine, h.why]));
  const verdicts = prove ? kvVerdicts(observed, plan) : new Map<string, never>();
  const edited = new Set<string>();
  const seen = new Set<string>();
  for (const name of Object.keys(observed.engines)) {
    const rec = store.engine(name);
    if (!rec) continue;
    const why = halted.get(name) ?? null;
    if (full) {
      rec.observed_at = observed.at;
      seen.add(name);
      const conditions = withNodeReachable(rec.conditions, observedEvidence(observed.engines[name]!), observed.at);
      if (!sameConditions(conditions, rec.conditions)) {
        rec.conditions = conditions;
        edited.add(name);
      }
    }
    if ((rec.halted ?? null) !== why) {
      rec.halted = why;
      edited.add(name);
    }
    const verdict = verdicts.get(name);
    const was = rec.conditions.find((c) => c.type === KV_CONDITION);
    // NotServing only replaces a verdict the engine had: one never proven needs no line yet.
    if (!verdict || (verdict.reason === "NotServing" && !was)) continue;
    const next = conditionBuilder(rec.conditions, observed.at)(
      KV_CONDITION,
      verdict.status,
      verdict.reason,
      verdict.message,
    );
    if (was && was.status === next.status && was.reason === next.reason && was.message === next.message) continue;
    rec.conditions = [...rec.conditions.filter((c) => c.type !== KV_CONDITION), next];
    edited.add(name);
  }
  // Edited in place: the store writes only the records it is told of, and of one that changed in nothing
  // but observed_at only that (a resync of a settled fleet would otherwise append every record whole).
  for (const name of edited) store.mark(name);
  for (const name of seen) if (!edited.has(name)) store.markObservedAt(name);
  return edited.size + seen.size > 0;
}

/** The same conditions in the same order (withNodeReachable keeps every other condition's object). */
function sameConditions(a: readonly Condition[], b: readonly Condition[]): boolean {
  return a.length === b.length && a.every((c, i) => c === b[i] || JSON.stringify(c) === JSON.stringify(b[i]));
}

/** What a full observation says about the engine's node: it could not be used, or it answered for the engine. */
function observedEvidence(o: ObservedEngine): NodeEvidence {
  if (o.liveness === "unknown" && o.node_fault) return { fault: o.node_fault };
  if (o.liveness === "alive" || o.liveness === "gone")
    return { answered: `observed the engine ${o.liveness === "alive" ? "running" : "gone"}` };
  return null;
}
