// What an operator must read about pairing, beside the plan's actions: prefill
// and decode engines that a router could never pair, predicted from desired/
// (pairing inputs after a change) or observed (recorded NIXL compatibility
// hashes, model trees, TP and block sizes of the engines in service). Pure.
import type { DesiredEngine, Observed, ObservedEngine } from "./plan-types.js";
import { fieldDiff, predictedPairKey } from "./field-diff.js";
import { compareNames, inService, isPairedRole, nameList } from "./in-service.js";
import { compatiblePairs, handshakeRefusal, nixlAgree, pairingClass } from "./kv-pairs.js";

/**
 * Warnings from the desired fleet alone: prefill and decode engines predicted to pair with none
 * (their pairing inputs differ; TP is not one: engines of several groups pair, kv-pairs.ts).
 */
export function pairingWarnings(desired: readonly DesiredEngine[]): string[] {
  const paired = desired.filter((d) => isPairedRole(d.role));
  if (!paired.some((d) => d.role === "prefill") || !paired.some((d) => d.role === "decode")) return [];
  const keys = new Map<string, Set<string>>();
  for (const d of paired) {
    const key = predictedPairKey(d.inputs);
    const roles = (keys.get(key) ?? new Set()).add(d.role);
    // One key both roles share is enough: the keys of the rest cannot change that (1000 keys made for none).
    if (roles.has("prefill") && roles.has("decode")) return [];
    keys.set(key, roles);
  }
  const ofRole = (role: string) =>
    paired.filter((d) => d.role === role).sort((a, b) => compareNames(a.engine, b.engine));
  const [p, d] = [ofRole("prefill"), ofRole("decode")];
  const differ = fieldDiff(p[0]!.inputs, d[0]!.inputs)
    .filter((f) => f.group)
    .map((f) => f.path);
  const names = (ds: DesiredEngine[]) => ds.map((x) => x.engine).join(", ");
  return [
    `after this change no captured prefill and decode share their pairing inputs (NIXL compatibility inputs, model, block size): prefill ${names(p)} and decode ${names(d)} differ in ${differ.slice(0, 3).join(", ")}${differ.length > 3 ? ` and ${differ.length - 3} more` : ""}; a router could pair none of them`,
  ];
}

const h12 = (h: string) => `${h.slice(0, 12)}…`;

/** Both engines hold one model: equal recorded trees, or (unrecorded) one group signature. */
const sameModel = (p: ObservedEngine, d: ObservedEngine): boolean =>
  p.model_tree_sha256 && d.model_tree_sha256
    ? p.model_tree_sha256 === d.model_tree_sha256
    : p.group_signature !== null && p.group_signature === d.group_signature;

/**
 * What an operator must read about pairing now: prefill and decode engines of one group whose
 * recorded NIXL compatibility hashes differ (vLLM refuses their handshake: never paired), and a
 * P/D fleet with prefill and decode engines in service but no compatible pair among them.
 */
export function kvPairWarnings(desired: readonly DesiredEngine[], observed: Observed): string[] {
  const serving = (role: string) =>
    desired
      .filter((d) => d.role === role && inService(observed.engines[d.engine]))
      .map((d) => observed.engines[d.engine]!)
      .sort((a, b) => compareNames(a.engine, b.engine));
  const [prefills, decodes] = [serving("prefill"), serving("decode")];
  if (prefills.length === 0 || decodes.length === 0) return [];
  // Every pair is judged, but by the pairing profiles of its two engines, each pair of profiles once: a
  // fleet of one model amid a vLLM upgrade (two NIXL hashes, half the engines on each) built a warning's
  // words for each of its 125,000 warned pairs at 1000 engines, every time the controller planned.
  const [pOf, dOf] = [new Profiles(prefills), new Profiles(decodes)];
  const verdicts = new Map<number, Verdict | null>();
  const warned = new WarnedPairs();
  prefills.forEach((p, i) => {
    const pp = pOf.ids[i]!;
    decodes.forEach((d, j) => {
      const key = pp * dOf.count + dOf.ids[j]!;
      let verdict = verdicts.get(key);
      if (verdict === undefined) verdicts.set(key, (verdict = judge(p, d)));
      if (verdict) warned.add(p.engine, d.engine, verdict);
    });
  });
  const warnings = warned.lines();
  if (compatiblePairs(desired, observed, new Set()).length === 0)
    warnings.push(
      `no compatible prefill/decode pair in service: prefill ${nameList(prefills.map((o) => o.engine))} and decode ${nameList(decodes.map((o) => o.engine))} differ in NIXL compatibility hash, model tree (or, unrecorded, group signature), TP ratio or block size; a router can pair none of them`,
    );
  return warnings;
}

/** Why a router could never pair prefill `p` with decode `d`: the words (without the names) and how to name them. */
interface Verdict {
  reason: string;
  words: PairWords;
}

/** Engines numbered by what judge() reads of them: engines of one number are judged alike against any peer. */
class Profiles {
  readonly ids: number[];
  count = 0;
  constructor(engines: readonly ObservedEngine[]) {
    const seen = new Map<string, number>();
    this.ids = engines.map((o) => {
      const key = JSON.stringify([
        o.model_tree_sha256 ?? null,
        o.group_signature,
        o.nixl_hash ?? null,
        o.tensor_parallel_size ?? null,
        o.block_size ?? null,
      ]);
      let id = seen.get(key);
      if (id === undefined) seen.set(key, (id = this.count++));
      return id;
    });
  }
}

function judge(p: ObservedEngine, d: ObservedEngine): Verdict | null {
  let words: PairWords | null = null;
  if (sameModel(p, d) && !nixlAgree(p, d))
    words = (ps, ds) =>
      `${ps} (prefill) and ${ds} (decode) serve one model but their recorded NIXL compatibility hashes differ (${h12(p.nixl_hash!)} vs ${h12(d.nixl_hash!)}): the inputs vLLM hashes (vLLM and connector version, --model, dtype, KV heads, head size, layers, attention backend, cache dtype) differ, so vLLM refuses their handshake; they are never paired. Compare the nixl-compat.json of their run directories`;
  else {
    const cls = pairingClass(p);
    const refusal = cls !== null && cls === pairingClass(d) ? handshakeRefusal(p, d) : null;
    if (refusal !== null)
      words = (ps, ds) =>
        `${ps} (prefill, TP ${p.tensor_parallel_size ?? "?"}) and ${ds} (decode, TP ${d.tensor_parallel_size ?? "?"}) agree on their NIXL compatibility hash, but ${refusal}; they are never paired. Give the decode a TP that is a multiple of the prefill's, and both one block size`;
  }
  return words && { reason: words("", ""), words };
}

/** A warning about prefills `ps` and decodes `ds` (names, joined), every one of whose pairs it holds for. */
type PairWords = (ps: string, ds: string) => string;

/**
 * Warned pairs, told as one line per set of prefills and set of decodes they share: a line's every
 * prefill × decode pair is warned, for the same reason. A line per pair made 500 prefills and 500
 * decodes of one model, half of each in another NIXL class (a rollout's midpoint), 125,000 lines.
 */
class WarnedPairs {
  /** By the words with no names in them (the reason): each prefill's decodes, in the order added. */
  private readonly byReason = new Map<string, { words: PairWords; decodes: Map<string, string[]> }>();

  /** Prefill `p` and decode `d` are warned for `verdict`; added in name order (prefills, then each one's decodes). */
  add(p: string, d: string, { reason, words }: Verdict): void {
    let of = this.byReason.get(reason);
    if (!of) this.byReason.set(reason, (of = { words, decodes: new Map() }));
    const ds = of.decodes.get(p);
    if (ds) ds.push(d);
    else of.decodes.set(p, [d]);
  }

  /** Prefills with the same decodes for one reason make one line (names in the order added: name order). */
  lines(): string[] {
    const out: string[] = [];
    for (const { words, decodes } of this.byReason.values()) {
      const prefillsOf = new Map<string, string[]>();
      for (const [p, ds] of decodes) {
        const key = ds.join(", ");
        const ps = prefillsOf.get(key);
        if (ps) ps.push(p);
        else prefillsOf.set(key, [p]);
      }
      for (const [ds, ps] of prefillsOf) out.push(words(ps.join(", "), ds));
    }
    return out;
  }
}
