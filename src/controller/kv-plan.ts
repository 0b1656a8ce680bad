// The planner's KV-proof decisions (issue 11, items 2–5): which decodes are
// restarted because a pair is not proven, which pair of each decode is proven
// next, which pairs are held out of serving and why, and the warnings about
// pairs that cannot be. Proofs of one decode never overlap: at most one prove
// per decode per plan (its first pair in prefill name order), and none for a
// decode this plan restarts or takes out. Pure.
import type { Action, DesiredEngine, KvPolicy, Observed } from "./plan-types.js";
import { compatiblePairs, decidePair, proven, type Pair } from "./kv-pairs.js";
import { inService, nameList } from "./in-service.js";
import { append } from "./map-lists.js";
import { PairCount } from "./pair-count.js";

export interface ProofRestarts {
  /** restart-unproven actions, one per decode at most. */
  actions: Action[];
  /** Pairs held out of serving (policy hold, or restarts used up), as the decode and why. */
  held: Array<{ decode: string; why: string }>;
  /** Decodes whose restart after their prefill's (restart_decodes) waits for the decode budget, and why. */
  deferred: Array<{ decode: string; why: string }>;
}

const byDecode = (pairs: readonly Pair[]): Map<string, Pair[]> => {
  const m = new Map<string, Pair[]>();
  for (const p of pairs) append(m, p.decode, p);
  return m;
};

const decision = (observed: Observed, pair: Pair, kv: KvPolicy) =>
  decidePair(observed, observed.engines[pair.prefill]!, observed.engines[pair.decode]!, kv);

/** Both engines observed running now: an engine that cannot be observed is never proven or restarted on a guess. */
const observable = (observed: Observed, pair: Pair) =>
  observed.engines[pair.prefill]?.liveness === "alive" && observed.engines[pair.decode]?.liveness === "alive";

/**
 * Decodes restarted because a pair of theirs failed its proof (a repair: like a lost engine, not
 * gated), or lost its proven prefill under restart_decodes: a decode that still serves other pairs
 * restarts only while fewer than `maxDecodesOut` decodes are out of service (or not yet proven),
 * and not when that takes the last proven pair out while another decode is on its way back (with
 * none coming back it restarts anyway: waiting would never prove its restarted prefill).
 */
export function proofRestarts(
  desired: readonly DesiredEngine[],
  observed: Observed,
  kv: KvPolicy,
  disrupted: ReadonlySet<string>,
  maxDecodesOut: number,
): ProofRestarts {
  const out: ProofRestarts = { actions: [], held: [], deferred: [] };
  if (!kv.prove) return out;
  const unproven = awaitingProof(desired, observed, kv, disrupted);
  const decodesOut = new Set(
    desired
      .filter((d) => d.role === "decode")
      .filter((d) => disrupted.has(d.engine) || !inService(observed.engines[d.engine]) || unproven.has(d.engine))
      .map((d) => d.engine),
  );
  const pairs = compatiblePairs(desired, observed, disrupted);
  // The proven pairs, without the decodes restarted so far (one count, not the fleet's pairs again per decode).
  const provenPairs = new PairCount(pairs.filter((p) => proven(observed, p.prefill, p.decode)));
  // Another decode on its way to a proven pair (restarting, starting, or awaiting its proof): worth waiting for.
  const comingBack = (decode: string) =>
    desired.some((d) => {
      const o = observed.engines[d.engine];
      return (
        d.role === "decode" && d.engine !== decode && decodesOut.has(d.engine) && !(o?.phase === "failed" && o.terminal)
      );
    });
  for (const [decode, ofDecode] of byDecode(pairs)) {
    const decisions = ofDecode
      .filter((pair) => observable(observed, pair))
      .map((pair) => ({ pair, d: decision(observed, pair, kv) }));
    const restart =
      decisions.find((x) => x.d.kind === "restart" && x.d.repair) ?? decisions.find((x) => x.d.kind === "restart");
    if (restart?.d.kind !== "restart") {
      for (const x of decisions) if (x.d.kind === "held") out.held.push({ decode, why: x.d.why });
      continue;
    }
    // A decode proven with no peer serves nothing: its restart costs no service, like a repair.
    const wait =
      restart.d.repair || unproven.has(decode)
        ? null
        : decodesOut.size >= maxDecodesOut
          ? `${maxDecodesOut} decode engine(s) may be out of service or unproven at once, and ${nameList(decodesOut)} ${decodesOut.size === 1 ? "is" : "are"}`
          : provenPairs.standsWithout() && !provenPairs.standsWithout([decode]) && comingBack(decode)
            ? "restarting it now would leave no proven prefill/decode pair serving"
            : null;
    if (wait) {
      out.deferred.push({ decode, why: `${restart.d.reason}; it waits: ${wait}` });
      continue;
    }
    // Its new instance is proven again: what held its old one no longer applies.
    out.actions.push({
      kind: "restart-unproven",
      engine: decode,
      prefill: restart.pair.prefill,
      reason: restart.d.reason,
    });
    decodesOut.add(decode);
    provenPairs.takeOut(decode);
  }
  return out;
}

/** The next proof of each decode the plan leaves in service (`out`: restarted, replaced or removed now). */
export function proofActions(
  desired: readonly DesiredEngine[],
  observed: Observed,
  kv: KvPolicy,
  out: ReadonlySet<string>,
): Action[] {
  if (!kv.prove) return [];
  const actions: Action[] = [];
  for (const [decode, pairs] of byDecode(compatiblePairs(desired, observed, out))) {
    for (const pair of pairs) {
      if (!observable(observed, pair)) continue;
      const d = decision(observed, pair, kv);
      if (d.kind !== "prove") continue;
      actions.push({ kind: "prove", engine: decode, prefill: pair.prefill, reason: d.reason });
      break;
    }
  }
  return actions;
}

/**
 * Paired engines in service that wait for a proof: with a compatible peer in service, but proven
 * with none. A rollout does not count them as available (a replacement converges only when
 * proven); an engine already proven with a peer stays available while a new peer is proven, and
 * an engine with no compatible peer at all is not among them, so it never stalls a rollout.
 * Each maps to the peers it waits on.
 */
export function awaitingProof(
  desired: readonly DesiredEngine[],
  observed: Observed,
  kv: KvPolicy,
  out: ReadonlySet<string>,
): Map<string, string[]> {
  const peers = new Map<string, string[]>();
  const provenWith = new Set<string>();
  if (!kv.prove) return peers;
  for (const { prefill, decode } of compatiblePairs(desired, observed, out)) {
    if (proven(observed, prefill, decode)) [prefill, decode].forEach((e) => provenWith.add(e));
    append(peers, prefill, decode);
    append(peers, decode, prefill);
  }
  for (const e of provenWith) peers.delete(e);
  return peers;
}
