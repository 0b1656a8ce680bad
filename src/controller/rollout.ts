// Rollout gating: which pending changes this plan releases, which wait, and
// in what order the rest would run. An engine counts as out of service while
// it is not serving (whatever the cause: a rollout never adds to an outage
// beyond max_unavailable); a change that alters the group signature moves
// prefill and decode engines together, one P/D unit at a time, and never takes
// the last compatible pair out of service while a pair can come back by
// waiting. A replacement that fails halts every further release. With KV proofs
// on, a paired engine whose pair with a compatible peer is not yet proven is not
// yet available (kv-plan.ts awaitingProof): a replacement converges only when
// proven. Pure.
import type { DesiredEngine, KvPolicy, Observed, ObservedEngine, RolloutPolicy, RolloutStep } from "./plan-types.js";
import type { ChangeSummary } from "./field-diff.js";
import type { NodeFault } from "../errors.js";
import { compareNames, inService, isPairedRole } from "./serving-fleet.js";
import { awaitingProof } from "./kv-plan.js";
import { compatiblePairs, proven } from "./kv-pairs.js";
import { PairCount } from "./pair-count.js";

export { DEFAULT_ROLLOUT } from "../desired/rollout-policy.js";

/** A desired engine whose applied input hash differs from the desired one. */
export interface PendingChange {
  engine: string;
  role: string;
  change: ChangeSummary;
  /** Waiting on a step or an observation (the planner says why): listed as a later step, never released by the rollout. */
  held?: boolean;
  /**
   * Held because its engine cannot be observed now (its node or daemon does not answer), and why:
   * it keeps its place in its P/D unit, so its partner waits for it rather than moving without it.
   */
  unobservable?: string;
}

/** A node fault as the planner words it: "node node-b cannot be reached (…)". */
export function nodeWords(fault: NodeFault): string {
  const what = {
    unreachable: "cannot be reached",
    "host-key": "has a host key narwhal refuses",
    auth: "refuses narwhal's key",
  };
  return `node ${fault.node} ${what[fault.reason]} (${fault.message})`;
}

export interface RolloutDecision {
  released: Set<string>;
  waits: Map<string, { why: string; until: "rollout" | "halted" }>;
  steps: RolloutStep[];
  halted: Array<{ engine: string; why: string }>;
  /** E.g. a unit released although no compatible pair can keep serving (the fleet has too few engines). */
  warnings: string[];
}

/** max_unavailable of a role as a count: "N%" of the role's engines rounded down, at least 1. */
export function maxUnavailable(policy: RolloutPolicy, role: string, engines: number): number {
  const v = policy.max_unavailable[role] ?? policy.default_max_unavailable;
  if (typeof v === "number") return Math.max(1, Math.floor(v));
  const pct = Number(v.replace(/%$/, ""));
  return Math.max(1, Math.floor((engines * pct) / 100));
}

const h8 = (h: string) => h.slice(0, 8);

/** A failed replacement: the engine failed at its desired inputs, or is recorded as having halted and has not converged since. */
export function haltReason(d: DesiredEngine, o: ObservedEngine | undefined): string | null {
  if (!o || o.applied_hash !== d.input_hash) return null;
  // A node that cannot be used says nothing about the change: it blocks its own engines, not the rollout.
  if (o.phase === "failed" && !o.node_fault) {
    const cause = o.problem ? `: ${o.problem}` : "";
    return `${d.engine} failed at its desired inputs ${h8(d.input_hash)} (${o.terminal ? "terminal, no attempts left" : "retrying with backoff"})${cause}`;
  }
  if (o.halted && o.phase !== "captured") return o.halted;
  return null;
}

function stateOf(o: ObservedEngine | undefined, releasedNow: boolean, unproven: string[] | undefined): string {
  if (releasedNow) return "released by this plan";
  if (!o) return "not started yet";
  if (unproven) return `${o.phase}, its KV transfer with ${unproven.join(", ")} not yet proven`;
  if (o.retiring !== null || o.phase === "replacing") return "replacing";
  if (o.liveness === "gone") return "gone";
  return o.node_fault ? `${o.phase} (${nodeWords(o.node_fault)})` : o.phase;
}

/** Units in the order they would run: P/D units of incompatible changes (or one "recreate" step), then engine by engine. */
function unitsOf(
  pending: readonly PendingChange[],
  policy: RolloutPolicy,
): Array<{ engines: PendingChange[]; incompatible: boolean; recreate: boolean }> {
  const byName = [...pending].sort((a, b) => compareNames(a.engine, b.engine));
  const incompatible = byName.filter(
    (p) => p.change.group_changes && (policy.incompatible === "recreate" || isPairedRole(p.role)),
  );
  const units: Array<{ engines: PendingChange[]; incompatible: boolean; recreate: boolean }> = [];
  if (policy.incompatible === "recreate") {
    if (incompatible.length) units.push({ engines: incompatible, incompatible: true, recreate: true });
  } else {
    const prefill = incompatible.filter((p) => p.role === "prefill");
    const decode = incompatible.filter((p) => p.role === "decode");
    for (let i = 0; i < Math.max(prefill.length, decode.length); i++) {
      units.push({
        engines: [prefill[i], decode[i]].filter((p): p is PendingChange => !!p),
        incompatible: true,
        recreate: false,
      });
    }
  }
  for (const p of byName)
    if (!incompatible.includes(p)) units.push({ engines: [p], incompatible: p.change.group_changes, recreate: false });
  return units;
}

/** Held changes (a running step) as one step each, after the rest; an unobservable engine's is in its unit. */
function heldSteps(pending: readonly PendingChange[], status: "later" | "halted"): RolloutStep[] {
  return pending
    .filter((p) => p.held && !p.unobservable)
    .sort((a, b) => compareNames(a.engine, b.engine))
    .map((p) => ({ engines: [p.engine], incompatible: p.change.group_changes, status }));
}

export function decideRollout(
  desired: readonly DesiredEngine[],
  observed: Observed,
  pending: readonly PendingChange[],
  policy: RolloutPolicy,
  disrupted: ReadonlySet<string>,
  kv: KvPolicy,
): RolloutDecision {
  const decision: RolloutDecision = { released: new Set(), waits: new Map(), steps: [], halted: [], warnings: [] };
  if (pending.length === 0) return decision;
  const releasable = pending.filter((p) => !p.held);
  // Computed once: a peer released by this plan keeps its engines waiting (the cautious side).
  const unproven = awaitingProof(desired, observed, kv, disrupted);
  // Running now (what a release takes down), and serving: running and, with proofs on, proven.
  const running = (d: DesiredEngine) =>
    !disrupted.has(d.engine) && !decision.released.has(d.engine) && inService(observed.engines[d.engine]);
  const serving = (d: DesiredEngine) => running(d) && !unproven.has(d.engine);
  const pendingNames = new Set(pending.map((p) => p.engine));
  // An engine that cannot be observed keeps its place in the units: its P/D partner waits for it
  // (one unit moves together), while the units of the other engines go on.
  const units = unitsOf(
    pending.filter((p) => !p.held || p.unobservable),
    policy,
  );

  for (const d of desired) {
    const why = haltReason(d, observed.engines[d.engine]);
    if (why !== null) decision.halted.push({ engine: d.engine, why });
  }
  if (decision.halted.length) {
    const why = `rollout halted: ${decision.halted.map((h) => h.why).join("; ")}; the engines not yet replaced keep their old inputs until the failed engine is captured or desired/ changes`;
    for (const p of releasable) decision.waits.set(p.engine, { why, until: "halted" });
    decision.steps = units.map((u) => ({
      engines: u.engines.map((p) => p.engine),
      incompatible: u.incompatible,
      status: "halted" as const,
    }));
    decision.steps.push(...heldSteps(pending, "halted"));
    return decision;
  }

  // What a unit's check reads of the whole fleet, kept up to date as units are released instead of
  // computed again for each unit: per unit that was O(engines + pairs), half a second of every plan of
  // a whole-fleet change at 1000 engines.
  const byName = new Map(desired.map((d, i) => [d.engine, { d, i }]));
  const roleCounts = new Map<string, number>();
  const outOfService = new Map<string, Set<string>>();
  const markOut = (d: DesiredEngine) => outOfService.set(d.role, (outOfService.get(d.role) ?? new Set()).add(d.engine));
  for (const d of desired) {
    roleCounts.set(d.role, (roleCounts.get(d.role) ?? 0) + 1);
    if (!serving(d)) markOut(d);
  }
  // The pairs serving now: compatible and running, and proven when proofs are on.
  const serves = new PairCount(
    compatiblePairs(desired, observed, disrupted).filter((p) => !kv.prove || proven(observed, p.prefill, p.decode)),
  );
  const release = (engine: string) => {
    decision.released.add(engine);
    serves.takeOut(engine);
    const known = byName.get(engine);
    if (known) markOut(known.d);
  };
  // Paired engines that are on their way back into service (a pair may return by waiting for them).
  const returning = () =>
    desired.filter((d) => {
      const o = observed.engines[d.engine];
      if (!isPairedRole(d.role) || serving(d) || (o?.phase === "failed" && o.terminal)) return false;
      return !pendingNames.has(d.engine) || decision.released.has(d.engine);
    });

  /** Why the unit cannot be released now; "pair": it would take the last compatible pair out (worded once all releases are known). */
  const blocked = (engines: PendingChange[]): string | "pair" | null => {
    // An engine captured but not yet proven is out of service, and taking it down is taken too.
    const taken = engines.filter((p) => running(byName.get(p.engine)!.d));
    const takenNames = new Set(taken.map((p) => p.engine));
    for (const role of new Set(taken.map((p) => p.role))) {
      const max = maxUnavailable(policy, role, roleCounts.get(role) ?? 0);
      const outOf = outOfService.get(role) ?? new Set<string>();
      const takenOfRole = taken.filter((p) => p.role === role);
      const outCount = outOf.size - takenOfRole.filter((p) => outOf.has(p.engine)).length;
      if (outCount + takenOfRole.length > max) {
        // In desired/'s order, as the operator lists them.
        const out = [...outOf].filter((e) => !takenNames.has(e)).sort((a, b) => byName.get(a)!.i - byName.get(b)!.i);
        const list = out
          .map((e) => `${e}, ${stateOf(observed.engines[e], decision.released.has(e), unproven.get(e))}`)
          .join("; ");
        return `rollout: ${out.length} of ${max} ${role} engines allowed out of service ${out.length === 1 ? "is" : "are"} ${list}`;
      }
    }
    if (!serves.standsWithout() || serves.standsWithout(takenNames)) return null;
    if (returning().length > 0) return "pair";
    decision.warnings.push(
      `rollout: replacing ${[...takenNames].join(", ")} leaves no compatible prefill/decode pair serving until they are captured: the fleet has too few engines to keep one (two of each role keep a pair through a P/D-unit rollout)`,
    );
    return null;
  };

  const heldForPair: PendingChange[][] = [];
  for (const u of units) {
    const unseen = u.engines.filter((p) => p.unobservable);
    if (unseen.length > 0 && u.recreate) {
      // Downtime is accepted for a recreate: the others go; the unobservable ones wait for observation.
      const going = u.engines.filter((p) => !p.unobservable).map((p) => p.engine);
      for (const e of going) release(e);
      if (going.length) decision.steps.push({ engines: going, incompatible: true, status: "now" });
      decision.steps.push({ engines: unseen.map((p) => p.engine), incompatible: true, status: "later" });
      continue;
    }
    if (unseen.length > 0) {
      const partners = unseen.map((p) => `${p.engine} waits: ${p.unobservable}`).join("; ");
      for (const p of u.engines.filter((x) => !x.unobservable))
        decision.waits.set(p.engine, {
          why: `rollout: its P/D unit moves together, and ${partners}`,
          until: "rollout",
        });
      decision.steps.push({ engines: u.engines.map((p) => p.engine), incompatible: u.incompatible, status: "later" });
      continue;
    }
    const why = u.recreate ? null : blocked(u.engines);
    if (why === null) for (const p of u.engines) release(p.engine);
    else if (why === "pair") heldForPair.push(u.engines);
    else for (const p of u.engines) decision.waits.set(p.engine, { why, until: "rollout" });
    decision.steps.push({
      engines: u.engines.map((p) => p.engine),
      incompatible: u.incompatible,
      status: why === null ? "now" : "later",
    });
  }
  const back = returning().map((d) => d.engine);
  for (const engines of heldForPair) {
    const why = `rollout: taking ${engines.map((p) => p.engine).join(", ")} out now would leave no compatible prefill/decode pair serving; waiting until ${back.join(", ")} ${back.length === 1 ? "is" : "are"} captured`;
    for (const p of engines) decision.waits.set(p.engine, { why, until: "rollout" });
  }
  decision.steps = [
    ...decision.steps.filter((s) => s.status === "now"),
    ...decision.steps.filter((s) => s.status !== "now"),
    ...heldSteps(pending, "later"),
  ];
  return decision;
}
