// kv-proof: prove that KV moves from one prefill to one decode (issue 11 item 3).
// One deterministic prompt through both, as vLLM's P/D proxy sends it: the
// prefill with kv_transfer_params {do_remote_decode: true} and max_tokens 1,
// the decode with the params the prefill returned. Both engines' /metrics are
// read around that pair of requests; the verdict (kv-proof-checks.ts) passes
// only when the decode's prompt arrived over NIXL, bytes moved, nothing failed
// or expired, and the decode's text equals its own local computation of the
// same prompt (a counter of zero is not proof: vllm #52234). The evidence goes
// into both run directories. A KV cause is a result, never a throw.
import path from "node:path";
import { randomUUID } from "node:crypto";
import { readProofEnd } from "./kv-proof-end.js";
import { counterDeltas, type KvCounters } from "./kv-watch.js";
import { sleep } from "./http.js";
import { judgeProof, type ProofObservation } from "./kv-proof-checks.js";
import {
  PROOF_MAX_TOKENS,
  PROOF_PROMPT,
  complete,
  connectable,
  lastNixlFailureLine,
  scrapePair,
} from "./kv-proof-requests.js";
import { KV_TRANSFER_SCHEMA, writeBothEvidence } from "./kv-proof-evidence.js";
import { NIXL_COMPAT_FILE, type NixlCompatRecord } from "./nixl-compat.js";
import { readJsonIfExists } from "../state/atomic-file.js";

export type ProofCause =
  | "handshake-refused"
  | "transfer-failed"
  | "silent-recompute"
  | "corrupted-blocks"
  | "expired"
  | "side-channel-localhost"
  | "side-channel-unreachable"
  | "request-failed"
  | "metrics-unreadable";

export interface ProofEnd {
  engine: string;
  /** Controller-side run directory: the plan is read from it and kv-transfer*.json is written into it. */
  run_dir: string;
  launch_token: string;
  /** Fleet node name (null: the controller's host), for the messages and the localhost rule. */
  node: string | null;
}

export interface KvProofCheck {
  name: string;
  passed: boolean;
  detail: string;
  /** The cause this check names when it fails. */
  cause?: ProofCause;
}

export { PROOF_MAX_TOKENS, PROOF_PROMPT } from "./kv-proof-requests.js";

export interface KvProofResult {
  passed: boolean;
  cause: ProofCause | null;
  /** One sentence an operator reads: names prefill and decode engines, the cause, the numbers, and the fix. */
  message: string;
  checks: KvProofCheck[];
  at: string;
  /** The kv-transfer*.json files written (both run dirs). */
  evidence: string[];
}

/** How long, and how often, the decode's counters are re-read when they have not moved yet after its answer. */
const SETTLE_MS = 2_000;
const SETTLE_STEP_MS = 100;

/** Anything a decode request moves: prompt tokens from either source, a transfer, a failure. */
function moved(before: KvCounters, after: KvCounters): boolean {
  const d = counterDeltas(before, after);
  return d.external + d.local_compute + d.local_cache_hit + d.bytes_transferred_count + d.failed_transfers > 0;
}

/** An end as the evidence names it: the ProofEnd's own fields (never whatever else the caller's object holds). */
const endRecord = (e: ProofEnd, endpoint: string) => ({
  engine: e.engine,
  node: e.node,
  run_dir: e.run_dir,
  launch_token: e.launch_token,
  endpoint,
});

const compatHash = async (dir: string) =>
  (await readJsonIfExists<NixlCompatRecord>(path.join(dir, NIXL_COMPAT_FILE)).catch(() => null))?.hash ?? null;

/**
 * Prove one prefill → decode pair. Returns the verdict for every KV cause; throws only for what is
 * not the pair's fault (a run directory missing, edited or of another run: typed, retryable set).
 */
export async function proveKvTransfer(
  prefill: ProofEnd,
  decode: ProofEnd,
  opts: { timeoutMs: number; signal?: AbortSignal },
): Promise<KvProofResult> {
  const at = new Date().toISOString();
  const [p, d] = await Promise.all([readProofEnd(prefill), readProofEnd(decode)]);
  const deadline = Date.now() + opts.timeoutMs;
  const left = () => Math.max(1, deadline - Date.now());
  const o: ProofObservation = {
    prefill: { engine: prefill.engine, node: prefill.node },
    decode: { engine: decode.engine, node: decode.node },
    block_size: d.block_size,
    prompt_tokens: null,
    reference: null,
    prefill_request: null,
    side_channel: { host: p.side_channel_host, port: p.side_channel_port, source: "the prefill's launch.json" },
    metrics_error: null,
    before: null,
    after: null,
    decode_request: null,
    side_channel_reachable: null,
    decode_log_line: null,
    compat_hashes: { prefill: await compatHash(prefill.run_dir), decode: await compatHash(decode.run_dir) },
    decode_text: null,
    reference_text: null,
  };
  // A fresh cache_salt per request keeps the decode's prefix cache out of the counters: the reference's
  // blocks are never reused by the transfer, nor an earlier proof's.
  const salt = randomUUID();
  const record: Record<string, unknown> = {};
  await (async () => {
    if (!judgeProof(o).checks.every((c) => c.passed)) return; // the planned side channel is already the trap
    // The reference first, so its local compute is outside the counters the proof compares.
    const ref = await complete(
      d,
      { max_tokens: PROOF_MAX_TOKENS, cache_salt: `${salt}-reference` },
      `narwhal-kv-proof-${salt}-reference`,
      left(),
      opts.signal,
    );
    o.reference = ref.outcome;
    o.reference_text = ref.text;
    o.prompt_tokens = ref.prompt_tokens;
    if (!ref.outcome.ok) return;
    const before = await scrapePair(p, d, left(), opts.signal);
    if (typeof before === "string") return void (o.metrics_error = before);
    o.before = before;
    const sent = {
      do_remote_decode: true,
      do_remote_prefill: false,
      remote_engine_id: null,
      remote_block_ids: null,
      remote_host: null,
      remote_port: null,
    };
    record.prefill_request_params = sent;
    const pre = await complete(
      p,
      { max_tokens: 1, kv_transfer_params: sent, cache_salt: salt },
      `narwhal-kv-proof-${salt}`,
      left(),
      opts.signal,
    );
    o.prefill_request = pre.outcome;
    if (pre.outcome.ok && !pre.kv_transfer_params)
      o.prefill_request = {
        ok: false,
        status: 200,
        detail: "answered 200 without kv_transfer_params: it runs without a NIXL KV connector",
      };
    if (!o.prefill_request.ok) return;
    const params = pre.kv_transfer_params!;
    record.prefill_response_params = params;
    o.side_channel = {
      host: String(params.remote_host ?? ""),
      port: Number(params.remote_port),
      source: "kv_transfer_params.remote_host/remote_port",
    };
    if (!judgeProof(o).checks.every((c) => c.passed)) return;
    const dec = await complete(
      d,
      { max_tokens: PROOF_MAX_TOKENS, kv_transfer_params: params, cache_salt: salt },
      `narwhal-kv-proof-${salt}`,
      left(),
      opts.signal,
    );
    o.decode_request = dec.outcome;
    o.decode_text = dec.text;
    let after = await scrapePair(p, d, left(), opts.signal);
    // vLLM publishes a request's counters from its output loop, which may trail the answer by an
    // iteration: a decode that answered but whose counters show nothing yet is read again, briefly.
    for (
      const until = Date.now() + SETTLE_MS;
      typeof after !== "string" && dec.outcome.ok && !moved(before.decode, after.decode) && Date.now() < until;
    ) {
      await sleep(SETTLE_STEP_MS, opts.signal);
      after = await scrapePair(p, d, left(), opts.signal);
    }
    if (typeof after === "string") return void (o.metrics_error = after);
    o.after = after;
    if (!dec.outcome.ok && counterDeltas(before.decode, after.decode).failed_transfers === 0) {
      o.side_channel_reachable = await connectable(o.side_channel.host, o.side_channel.port);
      o.decode_log_line = await lastNixlFailureLine(decode.run_dir);
    }
  })();
  const verdict = judgeProof(o);
  const doc = {
    schema: KV_TRANSFER_SCHEMA,
    prefill: endRecord(prefill, p.plan.endpoint),
    decode: endRecord(decode, d.plan.endpoint),
    prompt: { text: PROOF_PROMPT, tokens: o.prompt_tokens, max_tokens: PROOF_MAX_TOKENS, block_size: o.block_size },
    side_channel: o.side_channel,
    kv_transfer_params: {
      request: record.prefill_request_params ?? null,
      response: record.prefill_response_params ?? null,
    },
    counters: {
      before: o.before,
      after: o.after,
      deltas:
        o.before && o.after
          ? {
              prefill: counterDeltas(o.before.prefill, o.after.prefill),
              decode: counterDeltas(o.before.decode, o.after.decode),
            }
          : null,
    },
    texts: { decode: o.decode_text, reference: o.reference_text },
    checks: verdict.checks,
    passed: verdict.passed,
    cause: verdict.cause,
    message: verdict.message,
    at,
  };
  const evidence = await writeBothEvidence([prefill, decode], doc);
  return {
    passed: verdict.passed,
    cause: verdict.cause,
    message: verdict.message,
    checks: verdict.checks,
    at,
    evidence,
  };
}
