// Choosing what the router may send traffic to (state/serving-fleet.json):
// only captured engines, and among prefill and decode engines only one cache-
// equivalence group (the whole fleet is one pairing set: one router), so a
// prefill is never paired with a decode whose KV cache it cannot read. Pure.
import type { DesiredEngine, ObservedEngine, Observed, ServingEngine, ServingFleet } from "./plan-types.js";

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

/**
 * The URL the engine that runs answers on: while its change is held by a rollout it still runs
 * the inputs it was applied with, which may name another port than desired/ does now.
 */
function servedUrl(d: DesiredEngine, o: ObservedEngine): string {
  const applied = o.applied_inputs?.["url"];
  return o.applied_hash !== d.input_hash && typeof applied === "string" ? applied : d.url;
}

/** Engines that could be listed, with what the list needs: name, role and group. */
export interface Candidate {
  engine: string;
  role: string;
  group_signature: string | null;
  /** Captured at the desired inputs (no change pending). */
  current: boolean;
}

/** Groups that hold a captured prefill and a captured decode, most engines first, then by signature. */
export function pairedGroups(candidates: readonly Candidate[]): Array<{ signature: string; engines: string[] }> {
  const bySig = new Map<string, Candidate[]>();
  for (const c of candidates) {
    if (!isPairedRole(c.role) || c.group_signature === null) continue;
    bySig.set(c.group_signature, [...(bySig.get(c.group_signature) ?? []), c]);
  }
  return [...bySig.entries()]
    .filter(([, members]) => PAIRED_ROLES.every((r) => members.some((m) => m.role === r)))
    .map(([signature, members]) => ({ signature, engines: members.map((m) => m.engine).sort(compareNames) }))
    .sort(
      (a, b) =>
        b.engines.length - a.engines.length || (a.signature < b.signature ? -1 : a.signature > b.signature ? 1 : 0),
    );
}

/**
 * The group whose prefill and decode engines are listed: the desired state's (a group with a
 * captured pair at the desired inputs), else the one listed now if it still has a captured pair
 * (no flapping while a rollout runs), else the largest group with a pair; null: none has one.
 */
export function chooseGroup(candidates: readonly Candidate[], listedNow: string | null): string | null {
  const current = pairedGroups(candidates.filter((c) => c.current));
  if (current[0]) return current[0].signature;
  const all = pairedGroups(candidates);
  if (listedNow !== null && all.some((g) => g.signature === listedNow)) return listedNow;
  return all[0]?.signature ?? null;
}

/** One collator for every comparison (building one per localeCompare call dominated planning time). */
const NAME_ORDER = new Intl.Collator("en", { numeric: true });

/** "engine-2" before "engine-10": names compare by their number, as an operator reads them. */
export function compareNames(a: string, b: string): number {
  return NAME_ORDER.compare(a, b);
}

/**
 * serving-fleet.json after a plan: the desired engines in service that the plan leaves running
 * (`disrupted`: engines the plan replaces, restarts or removes are taken out now), prefill and
 * decode ones of the chosen group only.
 */
export function servingFleet(
  desired: readonly DesiredEngine[],
  observed: Observed,
  disrupted: ReadonlySet<string>,
): ServingFleet {
  const listed = desired
    .filter((d) => !disrupted.has(d.engine) && inService(observed.engines[d.engine]))
    .map((d) => ({ d, o: observed.engines[d.engine]! }));
  const candidates: Candidate[] = listed.map(({ d, o }) => ({
    engine: d.engine,
    role: d.role,
    group_signature: o.group_signature,
    current: o.applied_hash === d.input_hash && o.running_hash === d.input_hash,
  }));
  const group = chooseGroup(candidates, observed.serving?.group_signature ?? null);
  const engines: ServingEngine[] = listed
    .filter(({ d, o }) => (isPairedRole(d.role) ? group !== null && o.group_signature === group : true))
    .sort((a, b) => compareNames(a.d.engine, b.d.engine))
    .map(({ d, o }) => ({
      iid: d.iid,
      url: servedUrl(d, o),
      attestation_url: d.attestation_url,
      role: d.role,
      engine: d.engine,
      group_signature: o.group_signature ?? "",
    }));
  const pairs = engines
    .filter((p) => p.role === "prefill")
    .flatMap((p) => engines.filter((d) => d.role === "decode").map((d) => ({ prefill: p.engine, decode: d.engine })));
  return { group_signature: engines.some((e) => isPairedRole(e.role)) ? group : null, engines, pairs };
}
