// What `narwhal suspend|resume|retry` does to the state, in one place for both
// ways it arrives: through a request file to the controller that holds the state
// lock (applied here, then planned on), or, with no controller running, by the
// command itself under the lock. Suspension is data in the state file that the
// planner reads (suspension.ts); a retry is a one-shot mark on the next
// observation.
import type { StateStore } from "../state/store.js";
import type { OperatorRequest, RequestAck } from "../state/requests.js";

export type RequestResult = RequestAck["results"][number];

/** The engines a request names: every known one for --all. */
export function requestedEngines(req: Pick<OperatorRequest, "engines" | "all">, known: readonly string[]): string[] {
  return req.all ? [...new Set(known)].sort() : [...new Set(req.engines)];
}

/** Suspend or resume `names` in the store; one result per engine (an engine already so is ok, and said). */
export async function applySuspension(
  store: StateStore,
  kind: "suspend" | "resume",
  names: string[],
): Promise<RequestResult[]> {
  const before = store.suspended();
  await store.setSuspended(names, kind === "suspend");
  return names.map((engine) => {
    const since = before[engine];
    if (kind === "suspend")
      return {
        engine,
        ok: true,
        message: since
          ? `already suspended since ${since}`
          : "suspended: observed, never changed (no start, stop, replace, restart, removal or adoption) until narwhal resume",
      };
    return {
      engine,
      ok: true,
      message: since ? `resumed (suspended since ${since}): planned again` : "was not suspended",
    };
  });
}

/**
 * A retry of a suspended engine is refused, not kept for later: suspension means nothing is changed,
 * and a budget reset nobody sees apply would surprise at resume. Resume it; a terminal failure then
 * takes `narwhal retry`, a backoff continues from its deadline.
 */
export const retryRefused = (engine: string, since: string): RequestResult => ({
  engine,
  ok: false,
  message: `suspended since ${since}: nothing is retried while suspended; narwhal resume ${engine} first, then narwhal retry ${engine} if it is still failed terminally`,
});

export interface RequestTarget {
  store: StateStore;
  /** Engines desired now or recorded: what --all means, and what a name must be one of. */
  known(): string[];
  /** The engine's actor now (null: none). */
  actor(engine: string): { phase: string; terminal: boolean } | null;
  /** The state's suspensions changed: tell the engine actors now (a backoff timer reads it), not at the next plan. */
  suspensionChanged(): void;
  /** Engines the next observation marks retry_requested (the planner retries their terminal failure). */
  retries: Set<string>;
  /** Resolves once a fleet plan begun after the call ran and the actions it gave were executed. */
  replan(): Promise<void>;
}

/** Apply a request in the controller that holds the lock; one result per engine. */
export async function applyRequest(t: RequestTarget, req: OperatorRequest): Promise<RequestResult[]> {
  const known = t.known();
  const names = requestedEngines(req, known);
  const unknown = names.filter((n) => !known.includes(n));
  const results: RequestResult[] = unknown.map((engine) => ({
    engine,
    ok: false,
    message: `no engine named ${engine} in the state or desired/ (engines: ${known.join(", ") || "none"})`,
  }));
  const named = names.filter((n) => known.includes(n));
  if (req.kind !== "retry") {
    results.push(...(await applySuspension(t.store, req.kind, named)));
    t.suspensionChanged();
    await t.replan();
    return results;
  }
  const suspended = t.store.suspended();
  const retried: string[] = [];
  for (const engine of named) {
    const a = t.actor(engine);
    if (suspended[engine]) results.push(retryRefused(engine, suspended[engine]));
    else if (a?.phase !== "failed" || !a.terminal)
      results.push({
        engine,
        ok: false,
        message: `not failed terminally (${a ? `phase ${a.phase}${a.phase === "failed" ? ", retrying on its own after a backoff" : ""}` : "no engine of it runs yet"}): nothing to retry`,
      });
    else {
      t.retries.add(engine);
      retried.push(engine);
    }
  }
  if (retried.length) await t.replan();
  for (const engine of retried) {
    const a = t.actor(engine);
    const fresh = a !== null && !(a.phase === "failed" && a.terminal);
    results.push({
      engine,
      ok: fresh,
      message: fresh
        ? `a fresh attempt budget: retrying now (phase ${a.phase})`
        : "the retry was planned but the engine is still terminally failed; narwhal status shows why",
    });
  }
  return results;
}
