// The IO of one KV proof: its deterministic requests (the prompt, vLLM's P/D
// proxy fields), both engines' /metrics around them, and what can be learned
// after a decode failure nothing counted (can the controller open the side
// channel; the decode log's NIXL failure line). kv-proof.ts sequences them.
import net from "node:net";
import path from "node:path";
import { httpRequest, joinUrl } from "./http.js";
import type { ReadEnd } from "./kv-proof-end.js";
import { KvMetricsError, scrapeEndpoint } from "./kv-watch.js";
import type { PairCounters, RequestOutcome } from "./kv-proof-checks.js";
import { ENGINE_LOG, readFileTail } from "../backends/engine-log.js";

/**
 * The proof's prompt: fixed words (temperature 0, fixed max_tokens: the same text every time),
 * 136 words (more tokens under a subword tokenizer), so it spans more than one KV block at any
 * usual block size (16..64 tokens) and "about the prompt length" is far from zero.
 */
export const PROOF_PROMPT = Array.from(
  { length: 8 },
  (_, i) =>
    `Report ${i + 1}: the harbor pilot counted twelve ships waiting past the northern light before the tide turned`,
).join(". ");
export const PROOF_MAX_TOKENS = 16;
/** Side-channel reachability from the controller, only asked after a decode failure nothing counted. */
const SIDE_CHANNEL_CONNECT_MS = 2_000;
/** How much of the decode's log end is searched for its NIXL failure line. */
const LOG_TAIL_BYTES = 256 * 1024;
const NIXL_FAILURE_LINE = /NIXL compatibility hash mismatch|Remote NIXL agent engine ID mismatch|NIXL transfer failure/;

export interface Completion {
  outcome: RequestOutcome;
  text: string | null;
  prompt_tokens: number | null;
  kv_transfer_params: Record<string, unknown> | null;
}

/**
 * One non-streaming completion of the proof's prompt. `requestId` goes in X-Request-Id, as vLLM's P/D
 * proxy (toy_proxy_server.py) sends the same id to the prefill and the decode of one request.
 */
export async function complete(
  end: ReadEnd,
  body: Record<string, unknown>,
  requestId: string,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<Completion> {
  const url = joinUrl(end.plan.endpoint, "/v1/completions");
  const failed = (status: number | null, detail: string): Completion => ({
    outcome: { ok: false, status, detail },
    text: null,
    prompt_tokens: null,
    kv_transfer_params: null,
  });
  let res;
  try {
    res = await httpRequest(url, {
      timeoutMs,
      headers: { ...end.headers, "X-Request-Id": requestId },
      body: { model: end.plan.model.served_name, prompt: PROOF_PROMPT, temperature: 0, stream: false, ...body },
      ...(signal ? { signal } : {}),
    });
  } catch (err) {
    signal?.throwIfAborted();
    return failed(null, `POST ${url} got no answer: ${(err as Error).message}`);
  }
  const text = res.body.toString("utf8");
  if (res.status !== 200) return failed(res.status, `POST ${url} answered HTTP ${res.status}: ${text.slice(0, 200)}`);
  let json: {
    choices?: Array<{ text?: string }>;
    usage?: { prompt_tokens?: number };
    kv_transfer_params?: Record<string, unknown> | null;
  };
  try {
    json = JSON.parse(text) as typeof json;
  } catch {
    return failed(200, `POST ${url} answered 200 with a body that is not JSON`);
  }
  return {
    outcome: { ok: true, status: 200, detail: `POST ${url} answered 200` },
    text: json.choices?.[0]?.text ?? null,
    prompt_tokens: json.usage?.prompt_tokens ?? null,
    kv_transfer_params: json.kv_transfer_params ?? null,
  };
}

export async function scrapePair(
  p: ReadEnd,
  d: ReadEnd,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<PairCounters | string> {
  const opts = { timeoutMs, ...(signal ? { signal } : {}) };
  try {
    const [prefill, decode] = await Promise.all([
      scrapeEndpoint(p.end.engine, p.plan.endpoint, opts),
      scrapeEndpoint(d.end.engine, d.plan.endpoint, opts),
    ]);
    return { prefill, decode };
  } catch (err) {
    if (err instanceof KvMetricsError) return err.message;
    throw err;
  }
}

export function connectable(host: string, port: number): Promise<{ ok: boolean; detail: string }> {
  return new Promise((resolve) => {
    const sock = net.connect({ host: host || "localhost", port, timeout: SIDE_CHANNEL_CONNECT_MS });
    const done = (ok: boolean, detail: string) => {
      sock.destroy();
      resolve({ ok, detail });
    };
    sock.once("connect", () => done(true, `${host}:${port} accepts connections`));
    sock.once("timeout", () => done(false, `connecting to ${host}:${port} timed out`));
    sock.once("error", (e) => done(false, `connecting to ${host}:${port}: ${e.message}`));
  });
}

/** The last NIXL failure line of the decode's log in its run directory (a native engine writes it there). */
export async function lastNixlFailureLine(runDir: string): Promise<string | null> {
  let tail: string;
  try {
    tail = (await readFileTail(path.join(runDir, ENGINE_LOG), LOG_TAIL_BYTES)).toString("utf8");
  } catch {
    return null;
  }
  // vLLM logs the failure, then the exception naming its reason: the reason is the line to quote.
  const lines = tail.split("\n").filter((l) => NIXL_FAILURE_LINE.test(l));
  return lines.at(-1)?.trim() ?? null;
}
