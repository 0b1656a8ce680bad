// Which prefill → decode pairs may carry KV, and whether each is proven now
// (issue 11). A pair is two engines in service, of the prefill and decode
// roles, that pair as vLLM pairs them: equal NIXL compatibility hashes, one
// model tree, and a TP ratio and block size the handshake accepts. The group
// signature is not compared: it holds TP (seed 000 groups are for layout
// capture and the fabric budget), which vLLM leaves out of the hash on purpose,
// so a TP-2 prefill pairs with a TP-4 decode, and an edit of one engine's
// runtime that leaves the hashed inputs alone keeps its pair. Engines whose
// hash or tree is not recorded (runs checked before it was) pair as they did:
// within one group signature. A proof is current while both engines still run
// as the instances it proved (their launch tokens): a restart of either makes
// the pair unproven again. Pure.
import type { DesiredEngine, KvPolicy, Observed, ObservedEngine, ObservedProof } from "./plan-types.js";
import { pairKey } from "./plan-types.js";
import { compareNames, inService } from "./in-service.js";
import { tpRatioRefusal } from "../phases/nixl-compat.js";
import { append } from "./map-lists.js";

export interface Pair {
  prefill: string;
  decode: string;
}

/** The launch token of the instance that runs now (null: none). */
const tokenOf = (o: ObservedEngine): string | null => o.handle?.launch_token ?? null;

const tok8 = (t: string | null | undefined): string => (t ? t.slice(0, 8) : "none");

/** Whether the recorded NIXL compatibility hashes allow a handshake: equal, or one not recorded. */
export function nixlAgree(p: ObservedEngine, d: ObservedEngine): boolean {
  const [a, b] = [p.nixl_hash ?? null, d.nixl_hash ?? null];
  return a === null || b === null || a === b;
}

/**
 * What an engine pairs by: its NIXL compatibility hash and model tree digest, or, when either is
 * not recorded, `group <signature>` (the old rule: engines of one group share both). null: neither.
 */
export function pairingClass(o: ObservedEngine): string | null {
  if (o.nixl_hash && o.model_tree_sha256) return `nixl ${o.nixl_hash} tree ${o.model_tree_sha256}`;
  return o.group_signature !== null ? `group ${o.group_signature}` : null;
}

/** Why vLLM's handshake would refuse decode `d` reading from prefill `p` besides the hash (null: it accepts, or unknown). */
export function handshakeRefusal(p: ObservedEngine, d: ObservedEngine): string | null {
  const [ptp, dtp] = [p.tensor_parallel_size ?? null, d.tensor_parallel_size ?? null];
  const tp = ptp !== null && dtp !== null ? tpRatioRefusal(ptp, dtp) : null;
  if (tp !== null) return tp;
  const [pbs, dbs] = [p.block_size ?? null, d.block_size ?? null];
  return pbs !== null && dbs !== null && pbs !== dbs
    ? `vLLM's NIXL handshake refuses a remote prefill of another block size (prefill ${pbs}, decode ${dbs})`
    : null;
}

/** Prefill `p` and decode `d` could pair: both in service, one pairing class, NIXL hashes that agree, a handshake vLLM accepts. */
export function compatible(p: ObservedEngine | undefined, d: ObservedEngine | undefined): boolean {
  if (!inService(p) || !inService(d)) return false;
  const cls = pairingClass(p);
  return cls !== null && cls === pairingClass(d) && handshakeAccepts(p, d);
}

/** Within one pairing class: NIXL hashes that agree and a handshake vLLM accepts. */
function handshakeAccepts(p: ObservedEngine, d: ObservedEngine): boolean {
  return nixlAgree(p, d) && handshakeRefusal(p, d) === null;
}

/** The proof speaks for these instances of its prefill and decode (their launch tokens; null: none runs). */
function provesInstances(proof: ObservedProof, prefill: string | null, decode: string | null): boolean {
  return proof.prefill.launch_token === prefill && proof.decode.launch_token === decode;
}

/** The proof speaks for the instances of its two engines that run now. */
export function proofIsCurrent(proof: ObservedProof, observed: Observed): boolean {
  const [p, d] = [observed.engines[proof.prefill.engine], observed.engines[proof.decode.engine]];
  return provesInstances(proof, p ? tokenOf(p) : null, d ? tokenOf(d) : null);
}

/** The latest proof of the pair, if it proved the instances that run now. */
export function currentProof(observed: Observed, p: ObservedEngine, d: ObservedEngine): ObservedProof | null {
  const proof = observed.proofs?.[pairKey(p.engine, d.engine)];
  return proof && provesInstances(proof, tokenOf(p), tokenOf(d)) ? proof : null;
}

/** A pair proven now: compatible, and its current proof passed. */
export function proven(observed: Observed, p: string, d: string): boolean {
  const [op, od] = [observed.engines[p], observed.engines[d]];
  if (!op || !od || !compatible(op, od)) return false;
  return currentProof(observed, op, od)?.passed === true;
}

/** What the plan does about one pair. */
export type PairDecision =
  | { kind: "proven" }
  | { kind: "prove"; reason: string }
  /** repair: the decode failed its proof; otherwise policy restart_decodes after its prefill restarted. */
  | { kind: "restart"; reason: string; repair: boolean }
  /** Out of serving until an operator acts (policy hold, or restarts used up): why, as a warning. */
  | { kind: "held"; why: string };

function notCurrentReason(proof: ObservedProof | undefined, p: ObservedEngine, d: ObservedEngine): string {
  if (!proof) return `first transfer proof of ${p.engine} → ${d.engine}`;
  const last = proof.passed ? "it passed" : `it failed: ${proof.cause ?? "unknown cause"}`;
  const prefillNew = proof.prefill.launch_token !== tokenOf(p);
  const decodeNew = proof.decode.launch_token !== tokenOf(d);
  const what =
    prefillNew && decodeNew
      ? `both ${p.engine} and ${d.engine} restarted`
      : prefillNew
        ? `the prefill ${p.engine} restarted (new launch token ${tok8(tokenOf(p))}, proven as ${tok8(proof.prefill.launch_token)})`
        : `the decode restarted (new launch token ${tok8(tokenOf(d))}, proven as ${tok8(proof.decode.launch_token)})`;
  return `${what} since the pair ${p.engine} → ${d.engine} was last proven (${last}): proved again before it serves`;
}

/**
 * The pair's failed proofs in a row once a proof of `prefillToken` failed: the decode's restarts for them
 * count on (that is the budget max_decode_restarts bounds), but a new prefill instance (restarted or
 * replaced) starts the count again: what failed against the old one says nothing of it, and a decode
 * that never had a restart for it must get one before the pair is held.
 */
export function failuresInARow(prev: ObservedProof | undefined, prefillToken: string): number {
  return (prev && !prev.passed && prev.prefill.launch_token === prefillToken ? prev.failures : 0) + 1;
}

/** The decision for the compatible pair p → d under the policy (prove=true). */
export function decidePair(observed: Observed, p: ObservedEngine, d: ObservedEngine, kv: KvPolicy): PairDecision {
  const proof = currentProof(observed, p, d);
  if (!proof) {
    const latest = observed.proofs?.[pairKey(p.engine, d.engine)];
    const prefillRestarted =
      latest?.passed === true &&
      latest.decode.launch_token === tokenOf(d) &&
      latest.prefill.launch_token !== tokenOf(p);
    if (prefillRestarted && kv.on_prefill_restart === "restart_decodes")
      return {
        kind: "restart",
        repair: false,
        reason: `its prefill ${p.engine} restarted (launch token ${tok8(latest.prefill.launch_token)} → ${tok8(tokenOf(p))}) after the pair was proven; policy on_prefill_restart=restart_decodes restarts the decode (it may keep stale peer metadata) before the pair is proven again`,
      };
    return { kind: "prove", reason: notCurrentReason(latest, p, d) };
  }
  if (proof.passed) return { kind: "proven" };
  const found = `${proof.cause ?? "a failure"}: ${proof.message}`;
  if (proof.source === "watch")
    return {
      kind: "prove",
      reason: `the periodic scrape of the decode found ${found}; a transfer proof with ${p.engine} decides`,
    };
  if (kv.on_failure === "restart_decode" && proof.failures <= kv.max_decode_restarts)
    return {
      kind: "restart",
      repair: true,
      reason: `its transfer proof with ${p.engine} failed (${found}); restart ${proof.failures} of at most ${kv.max_decode_restarts} in a row (policy on_failure=restart_decode), then it is proven again`,
    };
  const policy =
    kv.on_failure === "hold"
      ? "policy on_failure=hold"
      : `${proof.failures} failed proofs in a row, past max_decode_restarts=${kv.max_decode_restarts}`;
  return {
    kind: "held",
    why: `pair ${p.engine} → ${d.engine} is held out of serving: its transfer proof failed (${found}); ${policy}. Fix the cause; a new instance of either engine (a restart or a change in desired/) is proven again`,
  };
}

/** Compatible pairs among the desired engines in service that the plan leaves running, by decode then prefill name. */
export function compatiblePairs(
  desired: readonly DesiredEngine[],
  observed: Observed,
  out: ReadonlySet<string>,
): Pair[] {
  const of = (role: string) =>
    desired
      .filter((d) => d.role === role && !out.has(d.engine))
      .map((d) => d.engine)
      .sort(compareNames);
  const [prefills, decodes] = [of("prefill"), of("decode")];
  // compatible() of each pair, with each prefill's pairing class computed once and only the prefills of a
  // decode's class tried (every pair built both class strings again: quadratic work at 1000 engines).
  const byClass = new Map<string, string[]>();
  for (const prefill of prefills) {
    const o = observed.engines[prefill];
    const cls = inService(o) ? pairingClass(o) : null;
    if (cls !== null) append(byClass, cls, prefill);
  }
  const pairs: Pair[] = [];
  for (const decode of decodes) {
    const d = observed.engines[decode];
    if (!inService(d)) continue;
    const cls = pairingClass(d);
    if (cls === null) continue;
    for (const prefill of byClass.get(cls) ?? []) {
      const p = observed.engines[prefill] as ObservedEngine;
      if (handshakeAccepts(p, d)) pairs.push({ prefill, decode });
    }
  }
  return pairs;
}

/** An engine in service, as the serving fleet offers it for pairing. */
export interface PairMember {
  engine: string;
  role: string;
  o: ObservedEngine;
}

/** A set of indices 0..n-1 as 32-bit words: subset tests cost n/32 word operations, not n lookups. */
class Bits {
  readonly words: Uint32Array;
  constructor(n: number) {
    this.words = new Uint32Array(Math.ceil(n / 32));
  }
  set(i: number): void {
    this.words[i >>> 5]! |= 1 << (i & 31);
  }
  has(i: number): boolean {
    return (this.words[i >>> 5]! & (1 << (i & 31))) !== 0;
  }
  empty(): boolean {
    return this.words.every((w) => w === 0);
  }
  /** Whether every member of this set is in `other`. */
  within(other: Bits): boolean {
    // No member outside `other` (bitwise results are signed 32-bit: compare with 0, not with w).
    return this.words.every((w, k) => (w & ~other.words[k]!) === 0);
  }
  key(): string {
    return this.words.join(",");
  }
}

/**
 * A large set of prefill and decode engines of one group in which every prefill × decode pair is
 * `ok` (the router pairs any listed prefill with any listed decode). Each engine in turn seeds a
 * candidate: its ok peers, then every engine of its own role ok with all of those; the largest
 * candidate wins, ties to the earlier seed (prefills, then decodes, in name order). Exact search
 * is exponential; this is deterministic, keeps every engine whose pairs are all ok, finds a pair
 * whenever one is ok, and is exact when one engine is at fault. Empty when no pair is ok.
 *
 * Cost: `ok` is asked once per pair (every plan computes this, and `ok` reads proofs), and a seed
 * whose peers equal an earlier seed's makes the same candidate, so it is skipped: a fleet whose
 * pairs are all ok costs one seed per role, not a cubic walk of every seed over every pair.
 */
export function pairableSet(
  prefills: readonly string[],
  decodes: readonly string[],
  ok: (prefill: string, decode: string) => boolean,
): string[] {
  // rows[i]: the decodes prefill i pairs with; cols[j]: the prefills decode j pairs with.
  const rows = prefills.map(() => new Bits(decodes.length));
  const cols = decodes.map(() => new Bits(prefills.length));
  prefills.forEach((p, i) =>
    decodes.forEach((d, j) => {
      if (ok(p, d)) (rows[i]!.set(j), cols[j]!.set(i));
    }),
  );
  let best: string[] = [];
  for (const [own, other, peersOf, isPrefill] of [
    [prefills, decodes, rows, true],
    [decodes, prefills, cols, false],
  ] as const) {
    const seen = new Set<string>();
    for (const peers of peersOf) {
      const key = peers.key();
      if (peers.empty() || seen.has(key)) continue;
      seen.add(key); // equal peers, equal candidate: it cannot beat the earlier one (ties go to the earlier)
      const mates = own.filter((_, x) => peers.within(peersOf[x]!));
      const others = other.filter((_, y) => peers.has(y));
      const set = isPrefill ? [...mates, ...others] : [...others, ...mates];
      if (set.length > best.length) best = set;
    }
  }
  return best;
}

/**
 * Engines that may be listed for pairing: per pairing class, a pairable set whose pairs are
 * proven (kv.prove) or compatible (proofs off: pairs serve by class as they did by group).
 */
export function listablePairs(members: readonly PairMember[], observed: Observed, kv: KvPolicy): Set<string> {
  const byClass = new Map<string, PairMember[]>();
  for (const m of members) {
    const cls = pairingClass(m.o);
    if (cls !== null && (m.role === "prefill" || m.role === "decode")) append(byClass, cls, m);
  }
  const out = new Set<string>();
  for (const members of byClass.values()) {
    const of = (role: string) =>
      members
        .filter((m) => m.role === role)
        .map((m) => m.engine)
        .sort(compareNames);
    const ok = (p: string, d: string) =>
      kv.prove ? proven(observed, p, d) : compatible(observed.engines[p], observed.engines[d]);
    for (const e of pairableSet(of("prefill"), of("decode"), ok)) out.add(e);
  }
  return out;
}
