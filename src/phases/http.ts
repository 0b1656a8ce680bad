// HTTP to the engine: every request carries the actor's AbortSignal plus its
// own deadline, so a hung engine never holds a step past its budget.
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
  const init: RequestInit = { signal, headers: { ...(opts.headers ?? {}) } };
  if (opts.body !== undefined) {
    init.method = "POST";
    init.body = JSON.stringify(opts.body);
    (init.headers as Record<string, string>)["Content-Type"] = "application/json";
  }
  const res = await fetch(url, init);
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
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
