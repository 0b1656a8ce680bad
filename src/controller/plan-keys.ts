// Which queue keys a plan gives work to: each engine's actions under its own
// key (an orphan's sweep under orphan:<token>, a decode's KV proofs under
// kv:<decode>, so a proof never holds up the engine's steps), and a key for every actor that must
// be started (restored at startup to resume a step or a backoff: its key starts it, with or without
// actions; a captured one waits unstarted for an action). A started engine that only waits gets no key. Pure.
import type { Action } from "./plan-types.js";
import { append } from "./map-lists.js";

/** The queue key of a decode's KV proofs (engine names have no colon). */
export const PROOF_KEY = "kv:";

export function keyedActions(
  actions: readonly Action[],
  toStart: Iterable<string>,
  isStarted: (key: string) => boolean,
): Map<string, Action[]> {
  const byKey = new Map<string, Action[]>();
  for (const a of actions) {
    const key =
      a.kind === "sweep-orphan" ? `orphan:${a.launch_token}` : a.kind === "prove" ? PROOF_KEY + a.engine : a.engine;
    append(byKey, key, a);
  }
  for (const name of toStart) if (!byKey.has(name)) byKey.set(name, []);
  for (const [key, list] of byKey) if (list.every((a) => a.kind === "wait") && isStarted(key)) byKey.delete(key);
  return byKey;
}
