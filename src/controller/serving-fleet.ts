// Choosing what the router may send traffic to (state/serving-fleet.json):
// only captured engines, and among prefill and decode engines only one cache-
// equivalence group (the whole fleet is one pairing set: one router), so a
// prefill is never paired with a decode whose KV cache it cannot read. Pure.
// With proofs on (fleet.json kv_transfer.prove), only proven pairs are listed (kv-pairs.ts).
import type { DesiredEngine, KvPolicy, ObservedEngine, Observed, ServingEngine, ServingFleet } from "./plan-types.js";
import { PAIRED_ROLES, compareNames, inService, isPairedRole } from "./in-service.js";
import { listablePairs, type Pair } from "./kv-pairs.js";

export { PAIRED_ROLES, compareNames, inService, isPairedRole };

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

/**
 * serving-fleet.json after a plan: the desired engines in service that the plan leaves running
 * (`disrupted`: engines the plan replaces, restarts or removes are taken out now), prefill and
 * decode ones of the chosen group only, and of those only a set whose every prefill × decode pair
 * may carry KV (proven, with proofs on; NIXL-compatible, without): the router pairs any of them.
 */
export function servingFleet(
  desired: readonly DesiredEngine[],
  observed: Observed,
  disrupted: ReadonlySet<string>,
  kv: KvPolicy,
): ServingFleet {
  const inServiceNow = desired
    .filter((d) => !disrupted.has(d.engine) && inService(observed.engines[d.engine]))
    .map((d) => ({ d, o: observed.engines[d.engine]! }));
  const pairable = listablePairs(
    inServiceNow.map(({ d, o }) => ({ engine: d.engine, role: d.role, o })),
    observed,
    kv,
  );
  const listed = inServiceNow.filter(({ d }) => !isPairedRole(d.role) || pairable.has(d.engine));
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
  const of = (role: string) => engines.filter((e) => e.role === role).map((e) => e.engine);
  const pairs: Pair[] = of("prefill").flatMap((prefill) => of("decode").map((decode) => ({ prefill, decode })));
  return { group_signature: engines.some((e) => isPairedRole(e.role)) ? group : null, engines, pairs };
}
