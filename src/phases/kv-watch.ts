// STUB: the decode-only scrape (wip/kvproof implements it).
import type { ProofCause } from "../controller/plan-types.js";
import type { ProofEnd } from "./kv-proof.js";

export interface KvCounters {
  external: number;
  local_compute: number;
  local_cache_hit: number;
  failed_transfers: number;
  failed_notifications: number;
  bytes_transferred_sum: number;
  at: string;
}
export function scrapeKvCounters(end: ProofEnd, opts: { timeoutMs: number; signal?: AbortSignal }): Promise<KvCounters> {
  void end;
  void opts;
  return Promise.reject(new Error("stub"));
}
export function decodeOnlyFinding(
  decode: string,
  prev: KvCounters,
  now: KvCounters,
): { cause: ProofCause; message: string } | null {
  void decode;
  void prev;
  void now;
  return null;
}
