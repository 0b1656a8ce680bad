// HTTP to the engine: every request carries the actor's AbortSignal plus its
// own deadline, so a hung engine never holds a step past its budget.
//
// node:http, not fetch: fetch loads undici on first use (about 45 ms of CPU, a
// tenth of a no-op reconcile) and reports every refused or cut connection as
// "fetch failed", where node:http names it ("connect ECONNREFUSED 127.0.0.1:8100",
// "socket hang up"). An abort rejects with the signal's reason, as fetch does:
// the deadline's TimeoutError is a failed request, the actor's abort a cancellation.
import http from "node:http";

export interface HttpResponse {
  status: number;
  body: Buffer;
}

export async function httpRequest(
  url: string,
  opts: { signal?: AbortSignal; timeoutMs: number; headers?: Record<string, string>; body?: unknown },
): Promise<HttpResponse> {
  const deadline = AbortSignal.timeout(opts.timeoutMs);
  const signal = opts.signal ? AbortSignal.any([opts.signal, deadline]) : deadline;
  signal.throwIfAborted();
  const target = new URL(url);
  // https only for an endpoint that names it (an attestation URL may): its module loads then.
  const client = target.protocol === "https:" ? await import("node:https") : http;
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  if (payload !== undefined) {
    headers["Content-Type"] = "application/json";
    headers["Content-Length"] = String(Buffer.byteLength(payload));
  }
  return new Promise<HttpResponse>((resolve, reject) => {
    const settle = (f: () => void) => {
      signal.removeEventListener("abort", onAbort);
      f();
    };
    const req = client.request(target, { method: payload === undefined ? "GET" : "POST", headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => settle(() => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) })));
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
