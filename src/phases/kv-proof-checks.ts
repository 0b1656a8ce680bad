// The verdict of a KV proof, pure: what was observed around one prefill →
// decode request goes in, the checks (in priority order), the cause of the
// first failing one and the operator's sentence come out. kv-proof.ts does
// the IO and feeds this; the unit tables in test/phases/kv-proof.test.ts
// drive it with counters captured from real simulator runs.
import type { KvProofCheck, ProofCause } from "./kv-proof.js";
import { counterDeltas, type KvCounters } from "./kv-watch.js";

/** An HTTP request of the proof: 200 with a body, or what went wrong instead. */
export interface RequestOutcome {
  ok: boolean;
  /** null: no answer (refused, timed out). */
  status: number | null;
  detail: string;
}

export interface PairCounters {
  prefill: KvCounters;
  decode: KvCounters;
}

export interface ProofObservation {
  prefill: { engine: string; node: string | null };
  decode: { engine: string; node: string | null };
  block_size: number;
  /** The decode's count of the prompt (usage.prompt_tokens of its reference answer). */
  prompt_tokens: number | null;
  reference: RequestOutcome | null;
  prefill_request: RequestOutcome | null;
  /** The side channel the prefill advertises: kv_transfer_params' remote_host when it answered, else its plan's. */
  side_channel: { host: string; port: number; source: string } | null;
  metrics_error: string | null;
  before: PairCounters | null;
  after: PairCounters | null;
  decode_request: RequestOutcome | null;
  /** After a decode failure with no counted failure: could the controller open the side channel itself? */
  side_channel_reachable: { ok: boolean; detail: string } | null;
  /** The decode log's last NIXL failure line, when its log could be read. */
  decode_log_line: string | null;
  /** nixl-compat.json's hash in each run directory (null: absent or unknown). */
  compat_hashes: { prefill: string | null; decode: string | null };
  decode_text: string | null;
  reference_text: string | null;
}

export type JudgedCheck = KvProofCheck & { cause: ProofCause };

const LOOPBACK = /^(localhost|ip6-localhost|ip6-loopback|127\.\d+\.\d+\.\d+|::1|0:0:0:0:0:0:0:1|0\.0\.0\.0|::|)$/i;

/** A side-channel host another machine cannot use: loopback, unspecified, or unset (vLLM's default localhost). */
export function isLoopbackHost(host: string): boolean {
  return LOOPBACK.test(host.replace(/^\[|\]$/g, "").trim());
}

/**
 * "About the prompt length": vLLM reads whole blocks from the prefill and computes the prompt's
 * last token on the decode (it needs that position's logits), so up to one block of the prompt may
 * be computed locally. external_kv_transfer must grow by at least prompt − block_size and at most
 * the prompt; less is a decode that recomputed the prompt itself.
 */
export function externalTokensExpected(prompt: number, blockSize: number): { min: number; max: number } {
  return { min: Math.max(1, prompt - blockSize), max: prompt };
}

const where = (node: string | null) => (node ? `node ${node}` : "the controller's host");

export const CAUSE_FIX: Record<ProofCause, string> = {
  "request-failed": "read the engine's answer and log; the pair stays unproven until a proof passes",
  "side-channel-localhost":
    "set the prefill's NARWHAL_NODE_<n>_IP / URL host to an address the decode's node reaches (it becomes VLLM_NIXL_SIDE_CHANNEL_HOST)",
  "side-channel-unreachable":
    "let the decode's node reach the prefill's side channel over TCP (route, firewall, VLLM_NIXL_SIDE_CHANNEL_HOST/PORT)",
  "handshake-refused":
    "pair only engines whose nixl-compat.json hashes agree (same vLLM, --model, dtype, attention backend, cache dtype)",
  "transfer-failed":
    "check the transport between the two nodes (UCX_TLS, UCX_NET_DEVICES) and the decode's log; restart the decode if its prefill restarted (stale peer metadata, vllm #49238)",
  expired:
    "the decode did not read the prefill's blocks in time: check the decode's load and VLLM_NIXL_ABORT_REQUEST_TIMEOUT",
  "silent-recompute":
    "the decode computes prompts itself: check its --kv-transfer-config (NixlConnector, kv_load_failure_policy fail) and restart it",
  "corrupted-blocks": "restart both engines and prove the pair again; keep the evidence (vllm #52234)",
  "metrics-unreadable":
    "start both engines with NixlConnector on a vLLM that exports the vllm:nixl_* and vllm:prompt_tokens_by_source series",
};

/** The checks an observation supports, in priority order (the first failing one is the cause). */
export function proofChecks(o: ProofObservation): JudgedCheck[] {
  const checks: JudgedCheck[] = [];
  const add = (name: string, passed: boolean, detail: string, cause: ProofCause) =>
    checks.push({ name, passed, detail, cause });
  if (o.reference)
    add("reference-request", o.reference.ok, `decode ${o.decode.engine}: ${o.reference.detail}`, "request-failed");
  if (o.prefill_request)
    add(
      "prefill-request",
      o.prefill_request.ok,
      `prefill ${o.prefill.engine}: ${o.prefill_request.detail}`,
      "request-failed",
    );
  if (o.side_channel) {
    const { host, port, source } = o.side_channel;
    const split = o.prefill.node !== o.decode.node;
    const trap = split && isLoopbackHost(host);
    add(
      "side-channel-host",
      !trap,
      trap
        ? `prefill ${o.prefill.engine} advertises its NIXL side channel at ${host || "localhost (VLLM_NIXL_SIDE_CHANNEL_HOST unset)"}:${port} (${source}), a loopback address, while decode ${o.decode.engine} runs on ${where(o.decode.node)} and the prefill on ${where(o.prefill.node)}`
        : `side channel ${host}:${port} (${source})${split ? "" : ", both engines on one node"}`,
      "side-channel-localhost",
    );
  }
  if (o.metrics_error !== null) add("metrics", false, o.metrics_error, "metrics-unreadable");
  if (o.decode_request) {
    const failedGrew = o.before && o.after ? failedDelta(o.before.decode, o.after.decode) > 0 : false;
    let cause: ProofCause = "request-failed";
    let detail = `decode ${o.decode.engine}: ${o.decode_request.detail}`;
    const status = o.decode_request.status;
    const unreachable = o.side_channel_reachable && !o.side_channel_reachable.ok;
    if (!o.decode_request.ok && failedGrew) cause = "transfer-failed";
    else if (!o.decode_request.ok && (status === null || status >= 500) && unreachable) {
      // No answer, or an error, and the side channel does not answer the controller either (a timeout
      // here is a handshake that hangs on an unreachable host).
      cause = "side-channel-unreachable";
      detail += `; the prefill's side channel does not answer the controller either: ${o.side_channel_reachable!.detail}`;
    } else if (!o.decode_request.ok && status !== null && status >= 500) {
      // vLLM logs a failed handshake and counts nothing: no transfer, no failure, an error answer.
      cause = "handshake-refused";
      detail += ", with no transfer and no counted failure: its handshake with the prefill failed";
      detail += o.decode_log_line
        ? `; the decode logged: ${o.decode_log_line}`
        : "; the decode's log line is not readable from here (look for 'NIXL compatibility hash mismatch')";
      const { prefill, decode } = o.compat_hashes;
      if (prefill && decode && prefill !== decode)
        detail += `; nixl-compat.json records prefill hash ${prefill}, decode hash ${decode}`;
    }
    add("decode-request", o.decode_request.ok, detail, cause);
  }
  if (o.before && o.after) {
    const d = counterDeltas(o.before.decode, o.after.decode);
    const p = counterDeltas(o.before.prefill, o.after.prefill);
    add(
      "no-failed-transfers",
      d.failed_transfers + d.failed_notifications === 0,
      `decode ${o.decode.engine}: failed transfers +${d.failed_transfers}, failed notifications +${d.failed_notifications}`,
      "transfer-failed",
    );
    add(
      "no-expired-requests",
      p.kv_expired_reqs === 0,
      `prefill ${o.prefill.engine}: expired KV requests +${p.kv_expired_reqs}`,
      "expired",
    );
    if (o.decode_request?.ok && o.prompt_tokens !== null) {
      const { min, max } = externalTokensExpected(o.prompt_tokens, o.block_size);
      add(
        "external-kv-tokens",
        d.external >= min && d.external <= max,
        `decode ${o.decode.engine}: external_kv_transfer +${d.external} (expected ${min}..${max} of a ${o.prompt_tokens}-token prompt, block size ${o.block_size}), local_compute +${d.local_compute}, local_cache_hit +${d.local_cache_hit}`,
        "silent-recompute",
      );
      add(
        "bytes-transferred",
        d.bytes_transferred_count >= 1 && d.bytes_transferred_sum > 0,
        `decode ${o.decode.engine}: vllm:nixl_bytes_transferred +${d.bytes_transferred_sum} bytes in +${d.bytes_transferred_count} transfer(s)`,
        "silent-recompute",
      );
    }
  }
  if (o.decode_text !== null && o.reference_text !== null)
    add(
      "text-matches-reference",
      o.decode_text === o.reference_text,
      o.decode_text === o.reference_text
        ? `decode ${o.decode.engine}'s text equals its local-compute reference`
        : `decode ${o.decode.engine} answered ${JSON.stringify(clip(o.decode_text))} but computes ${JSON.stringify(clip(o.reference_text))} locally for the same prompt`,
      "corrupted-blocks",
    );
  return checks;
}

const failedDelta = (a: KvCounters, b: KvCounters) =>
  b.failed_transfers - a.failed_transfers + (b.failed_notifications - a.failed_notifications);

const clip = (s: string) => (s.length > 80 ? `${s.slice(0, 77)}...` : s);

/** The verdict: passed only when every check ran and passed, with the operator's sentence. */
export function judgeProof(o: ProofObservation): {
  passed: boolean;
  cause: ProofCause | null;
  message: string;
  checks: JudgedCheck[];
} {
  const checks = proofChecks(o);
  const failed = checks.find((c) => !c.passed);
  const pair = `KV proof ${o.prefill.engine} (prefill, ${where(o.prefill.node)}) -> ${o.decode.engine} (decode, ${where(o.decode.node)})`;
  if (failed) {
    return {
      passed: false,
      cause: failed.cause,
      message: `${pair} failed, ${failed.cause}: ${failed.detail}. Fix: ${CAUSE_FIX[failed.cause]}.`,
      checks,
    };
  }
  const complete = ["external-kv-tokens", "bytes-transferred", "text-matches-reference"].every((n) =>
    checks.some((c) => c.name === n),
  );
  if (!complete)
    return {
      passed: false,
      cause: "request-failed",
      message: `${pair} did not complete: ${checks.map((c) => c.name).join(", ") || "no check"} ran. Fix: ${CAUSE_FIX["request-failed"]}.`,
      checks,
    };
  const d = counterDeltas(o.before!.decode, o.after!.decode);
  return {
    passed: true,
    cause: null,
    message: `${pair} passed: ${d.external} of ${o.prompt_tokens} prompt tokens arrived over NIXL (${d.bytes_transferred_sum} bytes), no failed transfer, nothing expired, and the text equals the decode's local-compute reference.`,
    checks,
  };
}
