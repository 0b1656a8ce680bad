// Which queue keys a plan gives work to: each engine's actions under its own
// key (an orphan's sweep under orphan:<token>), and a key for every actor not
// started yet (restored at startup: its key starts it, with or without
// actions). A started engine that only waits gets no key. Pure.
import type { Action } from "./plan-types.js";

export function keyedActions(
  actions: readonly Action[],
  unstarted: Iterable<string>,
  isStarted: (key: string) => boolean,
): Map<string, Action[]> {
  const byKey = new Map<string, Action[]>();
  for (const a of actions) {
    const key = a.kind === "sweep-orphan" ? `orphan:${a.launch_token}` : a.engine;
    byKey.set(key, [...(byKey.get(key) ?? []), a]);
  }
  for (const name of unstarted) if (!byKey.has(name)) byKey.set(name, []);
  for (const [key, list] of byKey) if (list.every((a) => a.kind === "wait") && isStarted(key)) byKey.delete(key);
  return byKey;
}
