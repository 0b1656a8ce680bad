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

// Building the collator costs 6 ms of CPU (ICU's locale data), paid by every command that orders names,
// while most comparisons are of engine names (engine-<k>, the only form the schema allows: ENGINE_NAME_PATTERN),
// which the collator orders by k: those compare by k without it, and it is built on the first other name (a
// node's). test/controller/name-order.test.ts holds the two orders equal. k is read by hand, not by a regex:
// status sorts every P/D pair by its two names (1024 pairs at 64 engines), and two matches a comparison made
// that sort 3x slower.
const ENGINE_PREFIX = "engine-";

/** k of engine-<k> (k 1–9999 without a leading zero, as ENGINE_NAME_PATTERN allows), else -1. */
function engineNumber(name: string): number {
  if (name.length <= ENGINE_PREFIX.length || name.length > ENGINE_PREFIX.length + 4) return -1;
  if (!name.startsWith(ENGINE_PREFIX)) return -1;
  let k = 0;
  for (let i = ENGINE_PREFIX.length; i < name.length; i++) {
    const digit = name.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9 || (digit === 0 && k === 0)) return -1;
    k = k * 10 + digit;
  }
  return k;
}

class NameOrder {
  #collator: Intl.Collator | undefined;
  compare(a: string, b: string): number {
    const ka = engineNumber(a);
    const kb = engineNumber(b);
    if (ka > 0 && kb > 0) return Math.sign(ka - kb);
    this.#collator ??= new Intl.Collator("en", { numeric: true });
    return this.#collator.compare(a, b);
  }
}

const NAME_ORDER = new NameOrder();

/** "engine-2" before "engine-10": names compare by their number, as an operator reads them. */
export function compareNames(a: string, b: string): number {
  return NAME_ORDER.compare(a, b);
}

/** Engine names as an operator reads a list of them: in name order, comma-separated. */
export const nameList = (names: Iterable<string>): string => [...names].sort(compareNames).join(", ");
