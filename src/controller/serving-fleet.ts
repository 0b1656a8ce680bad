// Choosing what the router may send traffic to (state/serving-fleet.json):
// only captured engines, and among prefill and decode engines only one pairing
// class (the whole fleet is one pairing set: one router), so a prefill is never
// paired with a decode whose KV cache it cannot read. A class is what vLLM
// pairs by (kv-pairs.ts pairingClass: NIXL hash and model tree), not the cache-
// equivalence group: a class may hold engines of several groups (a TP-2 prefill
// and a TP-4 decode), each listed with its own group. Pure.
// With proofs on (fleet.json kv_transfer.prove), only proven pairs are listed (kv-pairs.ts).
import type { DesiredEngine, KvPolicy, ObservedEngine, Observed, ServingEngine, ServingFleet } from "./plan-types.js";
import { PAIRED_ROLES, compareNames, inService, isPairedRole } from "./in-service.js";
import { listablePairs, pairingClass, type Pair } from "./kv-pairs.js";
import { append } from "./map-lists.js";

export { PAIRED_ROLES, compareNames, inService, isPairedRole };

/**
 * The URL the engine that runs answers on: while its change is held by a rollout it still runs
 * the inputs it was applied with, which may name another port than desired/ does now.
 */
function servedUrl(d: DesiredEngine, o: ObservedEngine): string {
  const applied = o.applied_inputs?.["url"];
  return o.applied_hash !== d.input_hash && typeof applied === "string" ? applied : d.url;
}

/** Engines that could be listed, with what the list needs: name, role and pairing class. */
export interface Candidate {
  engine: string;
  role: string;
  pairing_class: string | null;
  /** Captured at the desired inputs (no change pending). */
  current: boolean;
}

/** Pairing classes that hold a captured prefill and a captured decode, most engines first, then by class. */
export function pairedClasses(candidates: readonly Candidate[]): Array<{ cls: string; engines: string[] }> {
  const byClass = new Map<string, Candidate[]>();
  for (const c of candidates) {
    if (!isPairedRole(c.role) || c.pairing_class === null) continue;
    append(byClass, c.pairing_class, c);
  }
  return [...byClass.entries()]
    .filter(([, members]) => PAIRED_ROLES.every((r) => members.some((m) => m.role === r)))
    .map(([cls, members]) => ({ cls, engines: members.map((m) => m.engine).sort(compareNames) }))
    .sort((a, b) => b.engines.length - a.engines.length || (a.cls < b.cls ? -1 : a.cls > b.cls ? 1 : 0));
}

/**
 * The pairing class whose prefill and decode engines are listed: the desired state's (a class with
 * a captured pair at the desired inputs), else the one listed now if it still has a captured pair
 * (no flapping while a rollout runs), else the largest class with a pair; null: none has one.
 */
export function chooseClass(candidates: readonly Candidate[], listedNow: string | null): string | null {
  const current = pairedClasses(candidates.filter((c) => c.current));
  if (current[0]) return current[0].cls;
  const all = pairedClasses(candidates);
  if (listedNow !== null && all.some((g) => g.cls === listedNow)) return listedNow;
  return all[0]?.cls ?? null;
}

/** What serving-fleet.json lists now pairs by: its class, or for a file from before classes, its group's. */
function listedClass(serving: ServingFleet | null): string | null {
  if (!serving) return null;
  if (serving.pairing_class !== undefined) return serving.pairing_class;
  return serving.group_signature !== null ? `group ${serving.group_signature}` : null;
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
    pairing_class: pairingClass(o),
    current: o.applied_hash === d.input_hash && o.running_hash === d.input_hash,
  }));
  const cls = chooseClass(candidates, listedClass(observed.serving));
  const engines: ServingEngine[] = listed
    .filter(({ d, o }) => (isPairedRole(d.role) ? cls !== null && pairingClass(o) === cls : true))
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
  const decodes = of("decode"); // once, not once per prefill
  const pairs: Pair[] = of("prefill").flatMap((prefill) => decodes.map((decode) => ({ prefill, decode })));
  // group_signature stays for the readers of the file (status, plan render, routers that check it):
  // the one group of the listed P/D engines, or null when the class spans several (mixed TP).
  const groups = new Set(engines.filter((e) => isPairedRole(e.role)).map((e) => e.group_signature));
  const paired = groups.size > 0;
  return {
    group_signature: groups.size === 1 ? [...groups][0]! : null,
    pairing_class: paired ? cls : null,
    engines,
    pairs,
  };
}
