// What the serving fleet, the rollout and the KV pairs all ask of an engine:
// whether it serves now, whether its role is paired, and the name order an
// operator reads. Kept apart so those modules share it without importing each other.
import type { ObservedEngine } from "./plan-types.js";

/** The roles a router pairs: a prefill's KV cache goes to a decode of the same group. */
export const PAIRED_ROLES: readonly string[] = ["prefill", "decode"];
export const isPairedRole = (role: string): boolean => PAIRED_ROLES.includes(role);

/** An engine serving now: captured, not being replaced, not seen gone, and running what it was applied with. */
export function inService(o: ObservedEngine | undefined): o is ObservedEngine {
  return (
    !!o &&
    o.phase === "captured" &&
    o.retiring === null &&
    o.handle !== null &&
    o.liveness !== "gone" &&
    o.problem === null
  );
}

/** One collator for every comparison (building one per localeCompare call dominated planning time). */
const NAME_ORDER = new Intl.Collator("en", { numeric: true });

/** "engine-2" before "engine-10": names compare by their number, as an operator reads them. */
export function compareNames(a: string, b: string): number {
  return NAME_ORDER.compare(a, b);
}

/** Engine names as an operator reads a list of them: in name order, comma-separated. */
export const nameList = (names: Iterable<string>): string => [...names].sort(compareNames).join(", ");
