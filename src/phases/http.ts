// HTTP to the engine: every request carries the actor's AbortSignal plus its
// own deadline, so a hung engine never holds a step past its budget.
//
// http: through http-wire.ts (over node:net, at half node:http's CPU per
// request; GETs to one engine pipelined on one connection), https: (an
// attestation URL may be) through node:https. Not fetch: fetch loads undici on
// first use (about 45 ms of CPU, a tenth of a no-op reconcile) and reports every
// refused or cut connection as "fetch failed", where these name it ("connect
// ECONNREFUSED 127.0.0.1:8100", "socket hang up"). An abort rejects with the
// signal's reason, as fetch does: the deadline's TimeoutError is a failed
// request, the actor's abort a cancellation.
import { wireExchange } from "./http-wire.js";

export type { WireResponse as HttpResponse } from "./http-response.js";
import type { WireResponse as HttpResponse } from "./http-response.js";

export interface HttpOptions {
  signal?: AbortSignal;
  timeoutMs: number;
}

/** A GET of an endpoint's path (httpGets). */
export interface HttpGet {
  path: string;
  headers?: Record<string, string>;
}

/** Never aborted: what wireExchange is given when no actor's signal is. */
const noSignal = (signal?: AbortSignal): AbortSignal => signal ?? new AbortController().signal;

/** The actor's signal (if any) with the request's own deadline (node:https; http-wire keeps its own). */
function deadlineOf(opts: HttpOptions): AbortSignal {
  const deadline = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
  signal.throwIfAborted();
  return signal;
}

function refuseProtocol(target: URL): void {
  if (target.protocol !== "http:" && target.protocol !== "https:")
    throw Object.assign(new TypeError(`Protocol "${target.protocol}" not supported. Expected "http:" or "https:"`), {
      code: "ERR_INVALID_PROTOCOL",
    });
}

export async function httpRequest(
  url: string,
  opts: HttpOptions & { headers?: Record<string, string>; body?: unknown },
): Promise<HttpResponse> {
  opts.signal?.throwIfAborted();
  const target = new URL(url);
  refuseProtocol(target);
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  if (payload !== undefined) {
    headers["Content-Type"] = "application/json";
    headers["Content-Length"] = String(Buffer.byteLength(payload));
  }
  const method = payload === undefined ? "GET" : "POST";
  if (target.protocol === "http:") {
    const path = target.pathname + target.search;
    // The deadline is wireExchange's: the answer within timeoutMs (a TimeoutError, as AbortSignal.timeout's).
    const [answer] = await wireExchange(
      target,
      [{ method, path, headers, ...(payload !== undefined ? { payload } : {}) }],
      noSignal(opts.signal),
      opts.timeoutMs,
    );
    if (answer instanceof Error) throw answer;
    return answer!;
  }
  return httpsRequest(target, method, headers, payload, deadlineOf(opts));
}

/**
 * GETs of several paths of one endpoint, each with its response or why it has none, in order: pipelined on
 * one connection for http: (an engine's key checks and /health each resync), each answer given `timeoutMs`
 * after the one before it (a server answers pipelined requests one at a time, as it would sequential
 * ones); one request each, with its own deadline, for https:. Never rejects for an engine's failure.
 */
export async function httpGets(
  endpoint: string,
  gets: HttpGet[],
  opts: HttpOptions,
): Promise<Array<HttpResponse | Error>> {
  if (gets.length === 0) return [];
  opts.signal?.throwIfAborted();
  const targets = gets.map((g) => new URL(joinUrl(endpoint, g.path)));
  for (const t of targets) refuseProtocol(t);
  if (targets.every((t) => t.protocol === "http:" && t.host === targets[0]!.host))
    return wireExchange(
      targets[0]!,
      gets.map((g, i) => ({
        method: "GET",
        path: targets[i]!.pathname + targets[i]!.search,
        headers: g.headers ?? {},
      })),
      noSignal(opts.signal),
      opts.timeoutMs,
    );
  return Promise.all(
    targets.map((t, i) =>
      httpRequest(t.href, { ...opts, headers: gets[i]!.headers ?? {} }).catch((err: unknown) => err as Error),
    ),
  );
}

async function httpsRequest(
  target: URL,
  method: string,
  headers: Record<string, string>,
  payload: string | undefined,
  signal: AbortSignal,
): Promise<HttpResponse> {
  // Loaded for an endpoint that names https only.
  const https = await import("node:https");
  return new Promise<HttpResponse>((resolve, reject) => {
    const settle = (f: () => void) => {
      signal.removeEventListener("abort", onAbort);
      f();
    };
    const req = https.request(target, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      const heads = Object.entries(res.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : (v ?? "")]);
      res.on("end", () =>
        settle(() =>
          resolve({ status: res.statusCode ?? 0, headers: Object.fromEntries(heads), body: Buffer.concat(chunks) }),
        ),
      );
      res.on("error", (err) => settle(() => reject(err)));
    });
    const onAbort = () => {
      req.destroy();
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    req.on("error", (err) => settle(() => reject(err)));
    req.end(payload);
  });
}

export function joinUrl(endpoint: string, p: string): string {
  return endpoint.replace(/\/+$/, "") + p;
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
