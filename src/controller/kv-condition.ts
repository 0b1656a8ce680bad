// KVTransfer, the condition that says whether KV is proven to move between an
// engine and its P/D peers now: computed from the latest proofs and the plan
// that follows them, so `narwhal status` reads the same verdict the serving
// fleet was chosen by. Pure.
import type { Action, Observed, ObservedProof, Plan, ProofCause } from "./plan-types.js";
import { compareNames, isPairedRole } from "./serving-fleet.js";

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

/** The proof speaks for the instances that run now (the launch tokens of both handles). */
export function proofIsCurrent(p: ObservedProof, observed: Observed): boolean {
  return (
    observed.engines[p.prefill.engine]?.handle?.launch_token === p.prefill.launch_token &&
    observed.engines[p.decode.engine]?.handle?.launch_token === p.decode.launch_token
  );
}

const involves = (engine: string) => (p: ObservedProof) => p.prefill.engine === engine || p.decode.engine === engine;
const peerOf = (engine: string, p: ObservedProof) => (p.prefill.engine === engine ? p.decode.engine : p.prefill.engine);

/** A proof or a restart the plan runs for a pair of `engine`. */
type PairAction = Extract<Action, { kind: "prove" | "restart-unproven" }>;
function plannedFor(engine: string, actions: readonly Action[]): PairAction | undefined {
  return actions.find(
    (a): a is PairAction =>
      (a.kind === "prove" || a.kind === "restart-unproven") && (a.engine === engine || a.prefill === engine),
  );
}

/**
 * Per captured prefill or decode engine: False with the cause when a current proof of one of its
 * pairs failed; True when every current proof passed; False "Proving" while a proof is planned,
 * "NoPeer" when there is nothing to prove a transfer with. Engines not serving: "NotServing".
 */
export function kvVerdicts(observed: Observed, plan: Plan): Map<string, KvVerdict> {
  const verdicts = new Map<string, KvVerdict>();
  const proofs = Object.values(observed.proofs ?? {});
  for (const o of Object.values(observed.engines)) {
    if (o.role === null || !isPairedRole(o.role)) continue;
    if (o.phase !== "captured" || !o.handle) {
      verdicts.set(o.engine, {
        status: false,
        reason: "NotServing",
        message: `engine is ${o.phase}; its pairs are proven again once it is captured`,
      });
      continue;
    }
    const current = proofs.filter(involves(o.engine)).filter((p) => proofIsCurrent(p, observed));
    const failed = current
      .filter((p) => !p.passed)
      .sort((a, b) => compareNames(peerOf(o.engine, a), peerOf(o.engine, b)));
    const planned = plannedFor(o.engine, plan.actions);
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
        message: `KV moves ${o.role === "prefill" ? "to" : "from"} ${peers.join(", ")} (proven at ${at})`,
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
