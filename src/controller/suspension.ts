// Suspension in the plan (`narwhal suspend`, like `flux suspend`): a suspended
// engine is observed but never changed. Pure: the planner reads the suspended
// engines from the observation and holds every action for them, and every
// action that would reach one through its P/D partner (a proof of a pair with
// it, a decode restarted because its pair with a suspended prefill is not
// proven); in their place one wait says it is suspended and what is held.
import type { Action, Observed } from "./plan-types.js";
import { append } from "./map-lists.js";

const h8 = (h: string | null | undefined) => (h ? h.slice(0, 8) : "-");

/** A held change of a suspended engine's inputs, for the wait that names it. */
export interface HeldChange {
  engine: string;
  from: string | null;
  to: string;
  fields: string;
}

export const isSuspended = (observed: Observed, engine: string): boolean =>
  Object.hasOwn(observed.suspended ?? {}, engine);

/** What an action would do, in a few words, for the list of what suspension holds. */
function held(a: Action): string {
  switch (a.kind) {
    case "prove":
      return `a KV-transfer proof of ${a.prefill} → ${a.engine}`;
    case "restart-unproven":
      return `restarting ${a.engine} (pair with ${a.prefill} not proven)`;
    case "sweep-orphan":
      return `stopping an orphan (launch token ${a.launch_token.slice(0, 8)})`;
    default:
      return a.kind;
  }
}

/**
 * `actions` with nothing for a suspended engine, nor through one, and one wait per suspended engine
 * that `engines` (desired or recorded) names, saying what it holds. No suspension: `actions` as given.
 */
export function holdSuspended(
  actions: Action[],
  observed: Observed,
  engines: readonly string[],
  changes: readonly HeldChange[],
): Action[] {
  const since = observed.suspended ?? {};
  if (Object.keys(since).length === 0) return actions;
  const holds = new Map<string, string[]>();
  const hold = (engine: string, what: string) => append(holds, engine, what);
  for (const c of changes) hold(c.engine, `replace (inputs ${h8(c.from)} → ${h8(c.to)}: ${c.fields})`);
  const kept = actions.filter((a) => {
    const through = (a.kind === "prove" || a.kind === "restart-unproven") && Object.hasOwn(since, a.prefill);
    if (!Object.hasOwn(since, a.engine) && !through) return true;
    if (a.kind !== "wait")
      hold(
        Object.hasOwn(since, a.engine) || (a.kind !== "prove" && a.kind !== "restart-unproven") ? a.engine : a.prefill,
        held(a),
      );
    return false;
  });
  const waits: Action[] = [...new Set(engines)]
    .filter((e) => Object.hasOwn(since, e))
    .sort()
    .map((engine) => {
      const what = holds.get(engine);
      return {
        kind: "wait",
        engine,
        until: "suspended",
        why: `suspended since ${since[engine]}: observed, never changed (narwhal resume ${engine})${what ? `; held: ${[...new Set(what)].join("; ")}` : ""}`,
      };
    });
  return [...kept, ...waits];
}
