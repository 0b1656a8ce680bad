// STUB: the interface of the transfer proof (wip/kvproof implements it).
import type { ProofCause } from "../controller/plan-types.js";
export type { ProofCause };

export interface ProofEnd {
  engine: string;
  run_dir: string;
  launch_token: string;
  node: string | null;
}
export interface KvProofCheck {
  name: string;
  passed: boolean;
  detail: string;
}
export interface KvProofResult {
  passed: boolean;
  cause: ProofCause | null;
  message: string;
  checks: KvProofCheck[];
  at: string;
  evidence: string[];
}

export function proveKvTransfer(
  prefill: ProofEnd,
  decode: ProofEnd,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<KvProofResult> {
  void opts;
  return Promise.resolve({
    passed: true,
    cause: null,
    message: `stub proof ${prefill.engine} → ${decode.engine}`,
    checks: [],
    at: new Date().toISOString(),
    evidence: [],
  });
}
