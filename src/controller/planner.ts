// The pure planner: from what is desired and what is observed, every action
// the controller takes now, each with the reason an operator reads in
// `narwhal plan`. One place decides; the controller only executes. No IO, no
// clock: the same inputs always give the same plan.
import type {
  Action,
  DesiredEngine,
  DesiredForPlan,
  Observed,
  ObservedEngine,
  OwnedObserved,
  Plan,
  PlanPolicy,
} from "./plan-types.js";
import { describeFields, summarizeChange, type ChangeSummary } from "./field-diff.js";
import { decideRollout, maxUnavailable, nodeWords, type PendingChange } from "./rollout.js";
import { compareNames, servingFleet } from "./serving-fleet.js";
import { proofActions, proofRestarts } from "./kv-plan.js";
import { kvPairWarnings, pairingWarnings } from "./pairing-warnings.js";
import type { NodeFault } from "../errors.js";
import { holdSuspended, isSuspended } from "./suspension.js";

const h8 = (h: string | null | undefined) => (h ? h.slice(0, 8) : "-");

/** The order the controller executes actions in: adoptions before the orphan sweep, removals (freeing GPUs and ports) before creations. */
const ORDER: Record<Action["kind"], number> = {
  adopt: 0,
  "forget-retiring": 1,
  "restart-lost": 2,
  "restart-unproven": 3,
  retry: 4,
  remove: 5,
  create: 6,
  replace: 7,
  "sweep-orphan": 8,
  // Proofs last: they read engines the actions before them leave running.
  prove: 9,
  wait: 10,
};

/** An owned engine to adopt for `name`: one started from the desired inputs first, then by launch token. */
function adoptable(
  owned: readonly OwnedObserved[],
  claimed: ReadonlySet<string>,
  name: string,
  hash: string,
): OwnedObserved | undefined {
  return owned
    .filter((o) => o.engine === name && o.adoptable && !claimed.has(o.launch_token))
    .sort(
      (a, b) =>
        Number(b.input_hash === hash) - Number(a.input_hash === hash) || (a.launch_token < b.launch_token ? -1 : 1),
    )[0];
}

/** The node fault that keeps `d`'s node from being listed, if it is one of those. */
function unlistedNode(d: DesiredEngine, observed: Observed): NodeFault | undefined {
  const node = (d.inputs["node"] as { name?: unknown } | undefined)?.name;
  return observed.unlisted?.find((f) => f.node === node);
}

interface EngineDecision {
  actions: Action[];
  pending?: PendingChange;
  /** The plan takes this engine out of service now (restart, removal). */
  disrupts: boolean;
}

/** Decisions for an engine in desired/ that has a record or an actor. */
function desiredObserved(d: DesiredEngine, o: ObservedEngine, policy: PlanPolicy): EngineDecision {
  const change = (): PendingChange => ({
    engine: d.engine,
    role: d.role,
    change: summarizeChange(o.applied_inputs, d.inputs),
  });
  // A change that waits on a step or an observation is still pending: it is listed as a later rollout step.
  const wait = (why: string, until: "step" | "observation", keepsChange = true): EngineDecision => ({
    actions: [{ kind: "wait", engine: d.engine, why, until }],
    disrupts: false,
    ...(keepsChange && o.applied_hash !== d.input_hash
      ? { pending: { ...change(), held: true, ...(until === "observation" ? { unobservable: why } : {}) } }
      : {}),
  });
  if (o.deferred?.remove)
    return wait(
      `desired again while its removal is held until the running step settles; it is removed, then created anew`,
      "step",
      false,
    );
  if (o.deferred)
    return wait(
      `a step that cannot be abandoned runs (${o.phase}); the desired input ${h8(o.deferred.desiredHash ?? d.input_hash)} is held and applied when it settles`,
      "step",
    );
  if (o.phase === "removing")
    return wait(
      "desired again while its removal is under way; it is created anew once removed (no second stop)",
      "step",
      false,
    );
  if (o.liveness === "unknown")
    return wait(
      o.node_fault
        ? `cannot observe its engine now: ${nodeWords(o.node_fault)}; nothing is done on a guess until it answers`
        : `cannot observe its engine now (${o.handle?.kind ?? "?"}): nothing is done on a guess`,
      "observation",
    );
  const actions: Action[] = [];
  let disrupts = false;
  if (o.handle !== null && (o.liveness === "gone" || o.problem !== null)) {
    actions.push({
      kind: "restart-lost",
      engine: d.engine,
      reason: o.problem ?? "its recorded engine is no longer running",
    });
    disrupts = true;
  }
  // While it replaces the engine, its stop step is what ends the retiring one: gone is then the stop's
  // work, not a loss to report.
  if (o.retiring?.liveness === "gone" && o.phase !== "replacing") {
    actions.push({
      kind: "forget-retiring",
      engine: d.engine,
      reason: `the old engine (inputs ${h8(o.retiring.hash)}), kept serving during the replacement, is gone; the replacement goes on without it`,
    });
  }
  if (o.applied_hash !== d.input_hash) return { actions, disrupts, pending: change() };
  if (((policy.startup && !o.has_actor) || o.retry_requested) && o.phase === "failed" && o.terminal) {
    actions.push({
      kind: "retry",
      engine: d.engine,
      reason: o.retry_requested
        ? "failed with no attempts left; narwhal retry gives it a fresh attempt budget"
        : "failed with no attempts left in an earlier controller run; this run gives it a fresh attempt budget",
    });
  }
  return { actions, disrupts };
}

/** Decisions for an engine that is recorded but no longer in desired/. */
function notDesired(o: ObservedEngine): Action[] {
  if (o.phase === "removed") return [];
  if (o.phase === "removing" || o.deferred?.remove)
    return [
      {
        kind: "wait",
        engine: o.engine,
        why: "its removal is under way; it is not stopped a second time",
        until: "step",
      },
    ];
  if (o.liveness === "unknown")
    return [
      {
        kind: "wait",
        engine: o.engine,
        why: "not in desired/ any more, but its engine cannot be observed now: removed once it can be",
        until: "observation",
      },
    ];
  return [{ kind: "remove", engine: o.engine, reason: `not in desired/ any more${o.role ? ` (was ${o.role})` : ""}` }];
}

function replaceReason(d: DesiredEngine, o: ObservedEngine, change: ChangeSummary): string {
  const revert =
    o.retiring?.hash === d.input_hash
      ? "; the desired inputs went back to what its retiring engine serves, which is kept"
      : "";
  return `inputs changed from ${h8(o.applied_hash)} to ${h8(d.input_hash)}: ${describeFields(change)}${revert}`;
}

export function plan(desired: DesiredForPlan, observed: Observed, policy: PlanPolicy): Plan {
  const engines = [...desired.engines].sort((a, b) => compareNames(a.engine, b.engine));
  const actions: Action[] = [];
  const pending: PendingChange[] = [];
  const disrupted = new Set<string>();
  const claimed = new Set(observed.claimed);
  const desiredNames = new Set(engines.map((d) => d.engine));

  for (const d of engines) {
    const o = observed.engines[d.engine];
    if (!o || o.phase === "removed") {
      const adopt = policy.startup && !o ? adoptable(observed.owned, claimed, d.engine, d.input_hash) : undefined;
      if (adopt) {
        claimed.add(adopt.launch_token);
        const from =
          adopt.input_hash === d.input_hash
            ? "the desired inputs"
            : `inputs ${h8(adopt.input_hash)} (kept serving until its replacement is checked)`;
        actions.push({
          kind: "adopt",
          engine: d.engine,
          launch_token: adopt.launch_token,
          reason: `no record of it, but an engine this state directory started runs from ${from}; its run directory says how far it got`,
        });
      } else if (unlistedNode(d, observed)) {
        const fault = unlistedNode(d, observed)!;
        actions.push({
          kind: "wait",
          engine: d.engine,
          until: "observation",
          why: `not created on a guess: what runs on its node cannot be listed (${nodeWords(fault)}), and an engine of it may run there`,
        });
      } else {
        actions.push({
          kind: "create",
          engine: d.engine,
          role: d.role,
          reason: o ? "removed earlier and desired again" : "in desired/, not started yet",
        });
      }
      continue;
    }
    const decision = desiredObserved(d, o, policy);
    actions.push(...decision.actions);
    if (decision.pending) pending.push(decision.pending);
    if (decision.disrupts) disrupted.add(d.engine);
  }
  for (const o of Object.values(observed.engines).sort((a, b) => compareNames(a.engine, b.engine))) {
    if (desiredNames.has(o.engine)) continue;
    const a = notDesired(o);
    if (a.some((x) => x.kind === "remove")) disrupted.add(o.engine);
    actions.push(...a);
  }

  // A decode restarted for an unproven pair is out of service like a lost one: the rollout counts it.
  const decodes = engines.filter((d) => d.role === "decode").length;
  const restarts = proofRestarts(
    engines,
    observed,
    desired.kv,
    disrupted,
    maxUnavailable(desired.rollout, "decode", decodes),
  );
  actions.push(...restarts.actions);
  for (const a of restarts.actions) disrupted.add(a.engine);

  // A suspended engine's change is held out of the rollout: its partners' changes go on without it.
  const held = pending.filter((p) => isSuspended(observed, p.engine));
  const rollout = decideRollout(
    engines,
    observed,
    pending.filter((p) => !isSuspended(observed, p.engine)),
    desired.rollout,
    disrupted,
    desired.kv,
  );
  for (const p of pending.filter((x) => !x.held && !isSuspended(observed, x.engine))) {
    const d = engines.find((e) => e.engine === p.engine)!;
    const o = observed.engines[p.engine]!;
    const wait = rollout.waits.get(p.engine);
    if (wait) actions.push({ kind: "wait", engine: p.engine, why: wait.why, until: wait.until });
    else
      actions.push({
        kind: "replace",
        engine: p.engine,
        role: d.role,
        from_hash: o.applied_hash,
        to_hash: d.input_hash,
        fields: p.change.fields,
        group_changes: p.change.group_changes,
        reason: replaceReason(d, o, p.change),
      });
  }
  for (const owned of [...observed.owned].sort(
    (a, b) => compareNames(a.engine, b.engine) || (a.launch_token < b.launch_token ? -1 : 1),
  )) {
    if (claimed.has(owned.launch_token)) continue;
    actions.push({
      kind: "sweep-orphan",
      engine: owned.engine,
      launch_token: owned.launch_token,
      handle: owned.handle,
      reason: `started by this state directory (launch token ${owned.launch_token.slice(0, 8)}) but no record or actor stands for it`,
    });
  }

  for (const e of rollout.released) disrupted.add(e);
  actions.push(...proofActions(engines, observed, desired.kv, disrupted));
  // A held pair or a deferred restart: its decode waits unless another action is planned for it; held ones are warnings too.
  const kvWaits = [
    ...restarts.deferred.map((x) => ({ ...x, until: "rollout" as const })),
    ...restarts.held.map((x) => ({ ...x, until: "halted" as const })),
  ];
  for (const w of kvWaits)
    if (!actions.some((a) => a.engine === w.decode))
      actions.push({ kind: "wait", engine: w.decode, why: w.why, until: w.until });

  const kept = holdSuspended(
    actions,
    observed,
    [...desiredNames, ...Object.keys(observed.engines)],
    held.map((p) => ({
      engine: p.engine,
      from: observed.engines[p.engine]?.applied_hash ?? null,
      to: engines.find((e) => e.engine === p.engine)!.input_hash,
      fields: describeFields(p.change),
    })),
  );
  // Stable sort: within a kind, engines keep their name order (replaces: rollout order).
  const rank = new Map(rollout.steps.flatMap((s) => s.engines).map((e, i) => [e, i]));
  const ordered = kept
    .map((a, i) => ({ a, i }))
    .sort(
      (x, y) =>
        ORDER[x.a.kind] - ORDER[y.a.kind] ||
        (x.a.kind === "replace" ? (rank.get(x.a.engine) ?? 0) - (rank.get(y.a.engine) ?? 0) : 0) ||
        x.i - y.i,
    )
    .map((x) => x.a);
  return {
    actions: ordered,
    rollout: rollout.steps,
    halted: rollout.halted,
    serving: servingFleet(engines, observed, disrupted, desired.kv),
    warnings: [
      ...pairingWarnings(engines),
      ...kvPairWarnings(engines, observed),
      ...restarts.held.map((h) => h.why),
      ...rollout.warnings,
    ],
    changes: ordered.some((a) => a.kind !== "wait") || rollout.steps.length > 0,
  };
}
