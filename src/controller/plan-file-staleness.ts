// Whether a saved plan still describes the world: one line per difference between what the plan
// was computed from and what is desired and observed now, naming the engine and the field. An
// empty list means the plan is still valid; `narwhal apply` refuses a plan with any line.
import { canonicalJson } from "../desired/hash.js";
import { desiredFingerprint, observedProjection, type ObservedEngineProjection, type SavedPlan } from "./plan-file.js";
import type { Action, DesiredForPlan, Liveness, Observed, Plan } from "./plan-types.js";
import { append } from "./map-lists.js";
import { compareNames } from "./in-service.js";

/** Hashes and tokens as an operator compares them by eye: the first 12 characters. */
export const abbrev = (s: string | null | undefined): string => (s ? `${s.slice(0, 12)}…` : "none");

const union = (a: Iterable<string>, b: Iterable<string>) => [...new Set([...a, ...b])].sort(compareNames);

function desiredLines(saved: SavedPlan, now: DesiredForPlan): string[] {
  const was = saved.desired;
  const is = desiredFingerprint(now);
  const lines: string[] = [];
  for (const engine of union(Object.keys(was.engines), Object.keys(is.engines))) {
    const before = was.engines[engine];
    const after = is.engines[engine];
    if (before === undefined) lines.push(`${engine}: now desired, not in the plan`);
    else if (after === undefined)
      lines.push(`${engine}: no longer desired (the plan has input hash ${abbrev(before)})`);
    else if (before !== after)
      lines.push(`${engine}: desired input hash changed since the plan (${abbrev(before)} → ${abbrev(after)})`);
  }
  lines.push(...policyLines("rollout", was.rollout, is.rollout));
  // A plan saved before KV proofs recorded no kv_transfer policy: what it would change shows in the plan itself.
  if (was.kv && is.kv) lines.push(...policyLines("kv_transfer", was.kv, is.kv));
  return lines;
}

/** One line per field of a fleet.json policy block that differs between the plan and now. */
function policyLines(block: string, was: object, is: object): string[] {
  const field = (o: object, key: string) => canonicalJson((o as Record<string, unknown>)[key]);
  return union(Object.keys(was), Object.keys(is))
    .filter((key) => field(was, key) !== field(is, key))
    .map((key) => `${block} policy changed since the plan (${block}.${key}: ${field(was, key)} → ${field(is, key)})`);
}

/** A running engine as one word or token: "none", "gone", or its launch token (with its liveness when not alive). */
function running(token: string | null, liveness: Liveness | null): string {
  if (token === null) return "none";
  if (liveness === "gone") return "gone";
  return liveness === "alive" || liveness === null ? abbrev(token) : `${abbrev(token)} (${liveness})`;
}

function runningChange(
  what: string,
  engine: string,
  was: [string | null, Liveness | null],
  is: [string | null, Liveness | null],
): string | null {
  if (was[0] === is[0] && was[1] === is[1]) return null;
  const sameEngine = was[0] !== null && was[0] === is[0];
  // The same engine whose liveness changed: name it once, then say what became of it.
  const change = !sameEngine
    ? `${running(...was)} → ${running(...is)}`
    : is[1] === "gone"
      ? `${abbrev(was[0])} → gone`
      : `${abbrev(was[0])}: ${was[1] ?? "unobserved"} → ${is[1] ?? "unobserved"}`;
  return `${engine}: ${what} changed (launch token ${change})`;
}

function engineLines(engine: string, was: ObservedEngineProjection, is: ObservedEngineProjection): string[] {
  const lines: string[] = [];
  const changed = (field: string, before: string, after: string) => {
    if (before !== after) lines.push(`${engine}: ${field} changed since the plan (${before} → ${after})`);
  };
  changed("phase", was.phase, is.phase);
  changed("applied input hash", abbrev(was.applied_hash), abbrev(is.applied_hash));
  changed("running input hash", abbrev(was.running_hash), abbrev(is.running_hash));
  const run = runningChange("running engine", engine, [was.launch_token, was.liveness], [is.launch_token, is.liveness]);
  if (run) lines.push(run);
  const retiring = runningChange(
    "retiring engine",
    engine,
    [was.retiring?.launch_token ?? null, was.retiring?.liveness ?? null],
    [is.retiring?.launch_token ?? null, is.retiring?.liveness ?? null],
  );
  if (retiring) lines.push(retiring);
  if (was.terminal !== is.terminal)
    lines.push(
      `${engine}: ${is.terminal ? "now terminally failed" : "no longer terminally failed"} (the plan saw it ${was.terminal ? "terminal" : "not terminal"})`,
    );
  const deferred = (d: ObservedEngineProjection["deferred"]) => (d ? canonicalJson(d) : "none");
  changed("deferred desired event", deferred(was.deferred), deferred(is.deferred));
  return lines;
}

function observedLines(saved: SavedPlan, now: Observed): string[] {
  const was = saved.observed;
  const is = observedProjection(now);
  const lines: string[] = [];
  for (const engine of union(Object.keys(was.engines), Object.keys(is.engines))) {
    const before = was.engines[engine];
    const after = is.engines[engine];
    if (!before) lines.push(`${engine}: observed now (phase ${after!.phase}), not when the plan was made`);
    else if (!after) lines.push(`${engine}: no longer observed (the plan saw phase ${before.phase})`);
    else lines.push(...engineLines(engine, before, after));
  }
  const key = (o: { engine: string; launch_token: string }) => `${o.engine}\0${o.launch_token}`;
  const wasOwned = new Set(was.owned.map(key));
  const isOwned = new Set(is.owned.map(key));
  for (const o of is.owned)
    if (!wasOwned.has(key(o)))
      lines.push(
        `${o.engine}: an engine this state directory started runs now, not in the plan (launch token ${abbrev(o.launch_token)})`,
      );
  for (const o of was.owned)
    if (!isOwned.has(key(o)))
      lines.push(`${o.engine}: an engine the plan saw running is gone (launch token ${abbrev(o.launch_token)})`);
  return lines;
}

/** What an action does, without its words: reasons may name times or counts that move on their own. */
function actionKey(a: Action): string {
  switch (a.kind) {
    case "replace":
      return `replace ${abbrev(a.to_hash)}`;
    case "adopt":
    case "sweep-orphan":
      return `${a.kind} ${abbrev(a.launch_token)}`;
    case "wait":
      return `wait (${a.until})`;
    case "prove":
    case "restart-unproven":
      return `${a.kind} ${a.prefill}`;
    default:
      return a.kind;
  }
}

function planLines(saved: Plan, now: Plan): string[] {
  const per = (p: Plan) => {
    const m = new Map<string, string[]>();
    for (const a of p.actions) append(m, a.engine, actionKey(a));
    return m;
  };
  const was = per(saved);
  const is = per(now);
  const lines: string[] = [];
  for (const engine of union(was.keys(), is.keys())) {
    const before = (was.get(engine) ?? []).join(", ") || "nothing";
    const after = (is.get(engine) ?? []).join(", ") || "nothing";
    if (before !== after) lines.push(`${engine}: the plan says ${before}; planned now: ${after}`);
  }
  const steps = (p: Plan) => p.rollout.map((s) => `${s.status}:${s.engines.join("+")}`).join(" ");
  if (lines.length === 0 && steps(saved) !== steps(now))
    lines.push(`the rollout order changed since the plan (${steps(saved) || "none"} → ${steps(now) || "none"})`);
  return lines;
}

/**
 * Every difference between what `saved` was computed from and now, one line each, naming the
 * engine and the field; empty: the plan is still valid. With `planNow` (the plan computed from
 * now), a plan that would come out different — another policy, another planner — is refused too.
 */
export function staleness(
  saved: SavedPlan,
  desiredNow: DesiredForPlan,
  observedNow: Observed,
  planNow?: Plan,
): string[] {
  const lines = [...desiredLines(saved, desiredNow), ...observedLines(saved, observedNow)];
  // Differences in the plan follow from those above; only when there are none do they say something new.
  if (lines.length === 0 && planNow) lines.push(...planLines(saved.plan, planNow));
  return lines;
}
