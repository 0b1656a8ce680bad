// kv-watch: the cheap, repeatable half of proving the KV path (issue 11 item 4).
// One GET of a decode's /metrics gives the counters that move when KV arrives
// from a prefill (vllm:prompt_tokens_by_source_total{source="external_kv_transfer"})
// and when it does not (local_compute, the NIXL failure counters). Two scrapes
// of one decode around real traffic tell a silent decode-only engine
// (kv_load_failure_policy=recompute, a decode that ignores its params) from a
// healthy one; the comparison is pure so a watch timer can call it as often as
// it likes. kv-proof.ts reads the same counters around its one request.
import { NarwhalError } from "../errors.js";
import { httpRequest, joinUrl } from "./http.js";
import { parsePrometheus, type Sample } from "./prometheus.js";
import type { ProofCause, ProofEnd } from "./kv-proof.js";
import { readProofEnd } from "./kv-proof-end.js";

export interface KvCounters {
  /** vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}: prompt tokens whose KV came from a peer. */
  external: number;
  local_compute: number;
  local_cache_hit: number;
  failed_transfers: number;
  failed_notifications: number;
  bytes_transferred_sum: number;
  /** Observations of vllm:nixl_bytes_transferred: one per completed transfer. */
  bytes_transferred_count: number;
  /** vllm:nixl_num_kv_expired_reqs_total: blocks a prefill released because no decode read them in time. */
  kv_expired_reqs: number;
  at: string;
}

const PROMPT_BY_SOURCE = "vllm:prompt_tokens_by_source_total";
/** The series every engine with NixlConnector exposes: without them nothing can be proven (kserve #5987). */
export const REQUIRED_KV_SERIES = [
  PROMPT_BY_SOURCE,
  "vllm:nixl_bytes_transferred_sum",
  "vllm:nixl_bytes_transferred_count",
  "vllm:nixl_num_failed_transfers_total",
] as const;

/** /metrics could not be read, or lacks the KV series: the proof's "metrics-unreadable". */
export class KvMetricsError extends NarwhalError {
  readonly kvCause: ProofCause = "metrics-unreadable";
}

/** Sum over every label set (engine, model_name) of NAME whose labels include LABELS. */
function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const s of samples)
    if (s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  return sum;
}

/** The KV series of REQUIRED_KV_SERIES that a /metrics text lacks. */
export function missingKvSeries(samples: Sample[]): string[] {
  const names = new Set(samples.map((s) => s.name));
  return REQUIRED_KV_SERIES.filter((n) => !names.has(n));
}

/** Pure: the counters of one /metrics text (missing optional series read as 0). */
export function kvCountersFrom(samples: Sample[], at: string): KvCounters {
  return {
    external: total(samples, PROMPT_BY_SOURCE, { source: "external_kv_transfer" }),
    local_compute: total(samples, PROMPT_BY_SOURCE, { source: "local_compute" }),
    local_cache_hit: total(samples, PROMPT_BY_SOURCE, { source: "local_cache_hit" }),
    failed_transfers: total(samples, "vllm:nixl_num_failed_transfers_total"),
    failed_notifications: total(samples, "vllm:nixl_num_failed_notifications_total"),
    bytes_transferred_sum: total(samples, "vllm:nixl_bytes_transferred_sum"),
    bytes_transferred_count: total(samples, "vllm:nixl_bytes_transferred_count"),
    kv_expired_reqs: total(samples, "vllm:nixl_num_kv_expired_reqs_total"),
    at,
  };
}

/** GET one endpoint's /metrics and read its KV counters; KvMetricsError when unreadable or incomplete. */
export async function scrapeEndpoint(
  engine: string,
  endpoint: string,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<KvCounters> {
  const url = joinUrl(endpoint, "/metrics");
  let res;
  try {
    res = await httpRequest(url, { timeoutMs: opts.timeoutMs, ...(opts.signal ? { signal: opts.signal } : {}) });
  } catch (err) {
    opts.signal?.throwIfAborted();
    throw new KvMetricsError(`GET ${url} failed: ${(err as Error).message}`, {
      engine,
      input: endpoint,
      retryable: true,
      fix: `Check that ${engine} listens on ${endpoint}.`,
    });
  }
  if (res.status !== 200)
    throw new KvMetricsError(`GET ${url} answered HTTP ${res.status}`, {
      engine,
      input: endpoint,
      retryable: true,
      fix: `Read ${engine}'s log; /metrics needs no API key in vLLM.`,
    });
  const samples = parsePrometheus(res.body.toString("utf8"));
  const missing = missingKvSeries(samples);
  if (missing.length)
    throw new KvMetricsError(
      `${engine}'s /metrics lacks ${missing.join(", ")}: it runs without a NIXL KV connector, so no KV can reach it`,
      {
        engine,
        input: "kv_transfer_config",
        retryable: false,
        fix: `Start ${engine} with --kv-transfer-config naming NixlConnector (the fleet's kv_both config) and a vLLM that exports vllm:prompt_tokens_by_source.`,
      },
    );
  return kvCountersFrom(samples, new Date().toISOString());
}

/** One decode's KV counters, read from the endpoint its run directory's plan names (one GET, a short timeout). */
export async function scrapeKvCounters(
  end: ProofEnd,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<KvCounters> {
  const { plan } = await readProofEnd(end);
  return scrapeEndpoint(end.engine, plan.endpoint, opts);
}

const COUNTERS = [
  "external",
  "local_compute",
  "local_cache_hit",
  "failed_transfers",
  "failed_notifications",
  "bytes_transferred_sum",
  "bytes_transferred_count",
  "kv_expired_reqs",
] as const;

/** now - prev per counter. */
export function counterDeltas(prev: KvCounters, now: KvCounters): Record<(typeof COUNTERS)[number], number> {
  return Object.fromEntries(COUNTERS.map((k) => [k, now[k] - prev[k]])) as Record<(typeof COUNTERS)[number], number>;
}

/**
 * Pure: null when nothing is wrong between two scrapes of one decode, else the cause.
 * - A counter that went backwards means the process restarted between the scrapes (counters
 *   start at 0): nothing can be said about the interval, null.
 * - Failed transfers or notifications grew: transfer-failed (under kv_load_failure_policy=recompute
 *   the requests still answered 200, so only the counter shows it: vllm #32200).
 * - local_compute grew by more than external_kv_transfer: silent-recompute. A P/D decode computes
 *   locally only the prompt's last token per request (vLLM recomputes it), far below what arrives
 *   from its prefill; most of its prompt tokens computed locally means the transfers are skipped.
 */
export function decodeOnlyFinding(
  decode: string,
  prev: KvCounters,
  now: KvCounters,
): { cause: ProofCause; message: string } | null {
  const d = counterDeltas(prev, now);
  if (Object.values(d).some((v) => v < 0)) return null;
  const window = `between ${prev.at} and ${now.at}`;
  const failed = d.failed_transfers + d.failed_notifications;
  if (failed > 0)
    return {
      cause: "transfer-failed",
      message: `decode ${decode}: ${d.failed_transfers} NIXL transfer(s) and ${d.failed_notifications} notification(s) failed ${window} (vllm:nixl_num_failed_transfers_total); read the decode's log for "NIXL transfer failure" and prove the pair again.`,
    };
  if (d.local_compute > 0 && d.local_compute > d.external)
    return {
      cause: "silent-recompute",
      message: `decode ${decode} computed ${d.local_compute} prompt tokens locally and received ${d.external} from its prefill ${window}: it serves as decode-only, recomputing every prompt (vllm:prompt_tokens_by_source_total). Take the pair out of serving, prove it again, and restart the decode if the proof fails.`,
    };
  return null;
}
