// HTTP/1.1 exchanges on a connection of their own, over node:net: what every
// resync spends per engine on its /v1/models requests (and the probes, the
// start's health wait and the KV proofs on theirs). node:http builds a
// ClientRequest, an agent's socket bookkeeping and an IncomingMessage stream
// per request: 0.5-0.65 ms of CPU each against 0.3 ms so (fresh connections to
// the simulator, this 2-core machine, side by side). Several GETs to one engine
// go pipelined on one connection: a resync's two key checks open one
// connection an engine, not two (0.8 against 0.35 ms of CPU in a warm loop; a
// no-op of 64 engines 0.402 -> 0.394 s). Each response is read as node:http
// would: to its Content-Length, to its last chunk, or to the server's close.
import net from "node:net";
import { hangUp, ResponseReader, type WireResponse } from "./http-response.js";

export type { WireResponse } from "./http-response.js";

export interface WireRequest {
  method: string;
  /** The path and query, as the request line sends them. */
  path: string;
  headers: Record<string, string>;
  payload?: string;
}

/** The request's head; a header that would split it (CR or LF in a name or value) is refused, as node:http does. */
function requestHead(target: URL, req: WireRequest, last: boolean): string {
  const lines = [`${req.method} ${req.path} HTTP/1.1`, `Host: ${target.host}`, ...(last ? ["Connection: close"] : [])];
  for (const [name, value] of Object.entries(req.headers)) {
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value))
      throw Object.assign(new TypeError(`Invalid character in header content ["${name}"]`), {
        code: "ERR_INVALID_CHAR",
      });
    lines.push(`${name}: ${value}`);
  }
  return `${lines.join("\r\n")}\r\n\r\n${req.payload ?? ""}`;
}

/**
 * Send `requests` on one fresh connection, the last with Connection: close, and read their responses
 * in order. Resolves with those that came whole before the server closed (at least one: none is
 * "socket hang up"). Aborting `signal` destroys the connection and rejects with its reason; a
 * connection that fails rejects with its error (connect ECONNREFUSED 127.0.0.1:8100).
 */
function oneConnection(target: URL, requests: WireRequest[], signal: AbortSignal): Promise<WireResponse[]> {
  const bytes = requests.map((r, i) => requestHead(target, r, i === requests.length - 1)).join("");
  // An abort listener added to a signal already aborted (while an earlier connection was read) never fires.
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<WireResponse[]>((resolve, reject) => {
    const socket = net.connect({ host: target.hostname.replace(/^\[|\]$/g, ""), port: Number(target.port || 80) });
    const reader = new ResponseReader(requests.length);
    const finish = (outcome: () => void) => {
      signal.removeEventListener("abort", onAbort);
      socket.removeAllListeners("data");
      socket.destroy();
      outcome();
    };
    const onAbort = () => finish(() => reject(signal.reason));
    signal.addEventListener("abort", onAbort, { once: true });
    const step = (read: () => void, atEof: boolean) => {
      try {
        read();
      } catch (err) {
        return finish(() => reject(err as Error));
      }
      if (reader.done.length >= requests.length) finish(() => resolve(reader.done.slice(0, requests.length)));
      else if (atEof) finish(() => (reader.done.length > 0 ? resolve(reader.done) : reject(hangUp())));
    };
    socket.setNoDelay(true);
    // Not end(): a server may take a half-closed connection for a gone client and drop its answer.
    socket.on("connect", () => socket.write(bytes));
    socket.on("data", (chunk: Buffer) => step(() => reader.push(chunk), false));
    socket.on("end", () => step(() => reader.end(), true));
    socket.on("error", (err) => finish(() => reject(err)));
  });
}

/**
 * The responses to `requests`, in order. More than one are pipelined (GETs only: a request the server
 * did not answer before it closed is sent again, on a connection of its own).
 */
export async function wireExchange(target: URL, requests: WireRequest[], signal: AbortSignal): Promise<WireResponse[]> {
  if (requests.length > 1 && requests.some((r) => r.method !== "GET"))
    throw new Error("wireExchange: only GETs are pipelined");
  const got = await oneConnection(target, requests, signal);
  if (got.length >= requests.length) return got;
  return [...got, ...(await wireExchange(target, requests.slice(got.length), signal))];
}
