// KVTransfer, the condition that says whether KV is proven to move between an
// engine and its P/D peers now: computed from the latest proofs and the plan
// that follows them, so `narwhal status` reads the same verdict the serving
// fleet was chosen by. Pure.
import type { Action, Observed, ObservedProof, Plan, ProofCause } from "./plan-types.js";
import { compareNames, isPairedRole } from "./serving-fleet.js";
import { proofIsCurrent } from "./kv-pairs.js";
import { append } from "./map-lists.js";

export const KV_CONDITION = "KVTransfer";

export interface KvVerdict {
  status: boolean;
  reason: string;
  message: string;
}

const CAUSE_REASON: Record<ProofCause, string> = {
  "handshake-refused": "HandshakeRefused",
  "transfer-failed": "TransferFailed",
  "silent-recompute": "SilentRecompute",
  "corrupted-blocks": "CorruptedBlocks",
  expired: "Expired",
  "side-channel-localhost": "SideChannelLocalhost",
  "side-channel-unreachable": "SideChannelUnreachable",
  "request-failed": "RequestFailed",
  "metrics-unreadable": "MetricsUnreadable",
};

const peerOf = (engine: string, p: ObservedProof) => (p.prefill.engine === engine ? p.decode.engine : p.prefill.engine);

/** The verdict of an engine that does not serve now: its last proofs no longer speak for it. */
export const notServing = (phase: string): KvVerdict => ({
  status: false,
  reason: "NotServing",
  message: `engine is ${phase}; its pairs are proven again once it is captured`,
});

type PairAction = Extract<Action, { kind: "prove" | "restart-unproven" }>;

/** Per engine, the first proof or restart the plan runs for a pair of it (as its decode or its prefill). */
function plannedByEngine(actions: readonly Action[]): Map<string, PairAction> {
  const out = new Map<string, PairAction>();
  for (const a of actions) {
    if (a.kind !== "prove" && a.kind !== "restart-unproven") continue;
    for (const e of [a.engine, a.prefill]) if (!out.has(e)) out.set(e, a);
  }
  return out;
}

/** Per engine, the recorded proofs of its pairs that speak for the instances running now. */
function currentByEngine(observed: Observed): Map<string, ObservedProof[]> {
  const out = new Map<string, ObservedProof[]>();
  for (const p of Object.values(observed.proofs ?? {})) {
    if (!proofIsCurrent(p, observed)) continue;
    for (const e of [p.prefill.engine, p.decode.engine]) append(out, e, p);
  }
  return out;
}

/** Peers named one by one while they fit a condition; past eight (a pool's), counted: each record keeps its message. */
const PEERS_NAMED = 8;

function peerWords(peers: readonly string[], role: string): string {
  if (peers.length <= PEERS_NAMED) return peers.join(", ");
  const kind = role === "prefill" ? "decodes" : "prefills";
  return `${peers.length} ${kind}: ${peers.slice(0, 3).join(", ")} and ${peers.length - 3} more`;
}

/**
 * Per captured prefill or decode engine: False with the cause when a current proof of one of its
 * pairs failed; True when every current proof passed; False "Proving" while a proof is planned,
 * "NoPeer" when there is nothing to prove a transfer with. Engines not serving: "NotServing".
 */
export function kvVerdicts(observed: Observed, plan: Plan): Map<string, KvVerdict> {
  const verdicts = new Map<string, KvVerdict>();
  // Indexed once: every transition plans, and a fleet has many engines and pairs.
  const currentOf = currentByEngine(observed);
  const plannedOf = plannedByEngine(plan.actions);
  for (const o of Object.values(observed.engines)) {
    if (o.role === null || !isPairedRole(o.role)) continue;
    if (o.phase !== "captured" || !o.handle) {
      verdicts.set(o.engine, notServing(o.phase));
      continue;
    }
    const current = currentOf.get(o.engine) ?? [];
    const failed = current
      .filter((p) => !p.passed)
      .sort((a, b) => compareNames(peerOf(o.engine, a), peerOf(o.engine, b)));
    const planned = plannedOf.get(o.engine);
    if (failed[0]) {
      const f = failed[0];
      verdicts.set(o.engine, {
        status: false,
        reason: CAUSE_REASON[f.cause ?? "request-failed"],
        message: `${f.prefill.engine} → ${f.decode.engine}: ${f.message}${planned ? `; next: ${planned.reason}` : ""}`,
      });
    } else if (planned) {
      verdicts.set(o.engine, { status: false, reason: "Proving", message: planned.reason });
    } else if (current.length > 0) {
      const peers = [...new Set(current.map((p) => peerOf(o.engine, p)))].sort(compareNames);
      const at = current
        .map((p) => p.at)
        .sort()
        .at(-1);
      verdicts.set(o.engine, {
        status: true,
        reason: "Proven",
        message: `KV moves ${o.role === "prefill" ? "to" : "from"} ${peerWords(peers, o.role)} (proven at ${at})`,
      });
    } else {
      verdicts.set(o.engine, {
        status: false,
        reason: "NoPeer",
        message: `no captured ${o.role === "prefill" ? "decode" : "prefill"} with the same group and NIXL compatibility hash to prove a transfer with`,
      });
    }
  }
  return verdicts;
}
