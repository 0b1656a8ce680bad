// HTTP/1.1 exchanges on a connection of their own, over node:net: what every
// resync spends per engine on its /v1/models requests (and the probes, the
// start's health wait and the KV proofs on theirs). node:http builds a
// ClientRequest, an agent's socket bookkeeping and an IncomingMessage stream
// per request: 0.5-0.65 ms of CPU each against 0.3 ms so (fresh connections to
// the simulator, this 2-core machine, side by side). Several GETs to one engine
// go pipelined on one connection: a resync's key checks and /health open one
// connection an engine, not three (two key checks: 0.8 against 0.35 ms of CPU
// in a warm loop). Each response is read as node:http would: to its
// Content-Length, to its last chunk, or to the server's close.
import net from "node:net";
import type { Duplex } from "node:stream";
import { hangUp, ResponseReader, type WireResponse } from "./http-response.js";

export type { WireResponse } from "./http-response.js";

export interface WireRequest {
  method: string;
  /** The path and query, as the request line sends them. */
  path: string;
  headers: Record<string, string>;
  payload?: string;
}

/**
 * Where requests go other than a URL's host and port: `host` for the Host header, and `open` for each
 * connection (a unix socket, a remote command's stdio); bytes written before it connects are sent once it has.
 */
export interface WireTarget {
  host: string;
  open(): Duplex | Promise<Duplex>;
}

/** A URL's host and port as a target. */
function urlTarget(url: URL): WireTarget {
  return {
    host: url.host,
    open: () =>
      net.connect({ host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(url.port || 80), noDelay: true }),
  };
}

/** The request's head; a header that would split or corrupt it is refused, as node:http does. */
function requestHead(target: WireTarget, req: WireRequest, last: boolean): string {
  const lines = [`${req.method} ${req.path} HTTP/1.1`, `Host: ${target.host}`, ...(last ? ["Connection: close"] : [])];
  for (const [name, value] of Object.entries(req.headers)) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name))
      throw Object.assign(new TypeError(`Header name must be a valid HTTP token ["${name}"]`), {
        code: "ERR_INVALID_HTTP_TOKEN",
      });
    if (/[^\t\x20-\x7e\x80-\xff]/.test(value))
      throw Object.assign(new TypeError(`Invalid character in header content ["${name}"]`), {
        code: "ERR_INVALID_CHAR",
      });
    lines.push(`${name}: ${value}`);
  }
  return `${lines.join("\r\n")}\r\n\r\n${req.payload ?? ""}`;
}

/** Each request's outcome, in order: its response, or why it has none. */
export type WireAnswer = WireResponse | Error;

/**
 * What one connection gave: the responses read whole, in order, and `failure` for the rest; null when the
 * server closed (or reset) the connection after some answers, leaving the rest to be sent again.
 */
interface Connection {
  done: WireResponse[];
  failure: Error | null;
}

/** The reason AbortSignal.timeout gives: a deadline is a failed request, whichever way it was kept. */
const timeoutError = () => new DOMException("The operation was aborted due to timeout", "TimeoutError");

/**
 * Send `requests` on one fresh connection, the last with Connection: close, and read their responses in
 * order. Aborting `signal` ends it with the signal's reason; `answerMs` (if given) is how long each answer
 * may take after the one before it (or the connection's start). A connection that fails before any answer
 * fails them all with its error (connect ECONNREFUSED 127.0.0.1:8100, "socket hang up").
 */
function oneConnection(
  target: WireTarget,
  requests: WireRequest[],
  signal: AbortSignal,
  answerMs: number | undefined,
): Promise<Connection> {
  const bytes = requests.map((r, i) => requestHead(target, r, i === requests.length - 1)).join("");
  // An abort listener added to a signal already aborted (while an earlier connection was read) never fires.
  if (signal.aborted) return Promise.resolve({ done: [], failure: signal.reason as Error });
  return new Promise<Connection>((resolve) => {
    const reader = new ResponseReader(requests.length, (i) => requests[i]!.method === "HEAD");
    let socket: Duplex | undefined;
    let timer: NodeJS.Timeout | undefined;
    let finished = false;
    const finish = (failure: Error | null) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      socket?.removeAllListeners("data");
      socket?.destroy();
      resolve({ done: reader.done.slice(0, requests.length), failure });
    };
    const arm = () => {
      clearTimeout(timer);
      if (answerMs !== undefined) timer = setTimeout(() => finish(timeoutError()), answerMs);
    };
    const onAbort = () => finish(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    // Closed or reset after an answer: a server that answered with Connection: close while pipelined
    // requests were unread is reset by the kernel (ECONNRESET after the whole first answer).
    const cut = (err: Error) => finish(reader.done.length > 0 ? null : err);
    const step = (read: () => void, atEof: boolean) => {
      const before = reader.done.length;
      try {
        read();
      } catch (err) {
        return finish(err as Error);
      }
      if (reader.done.length >= requests.length) finish(null);
      else if (atEof) cut(hangUp());
      else if (reader.done.length > before) arm();
    };
    // The first answer's time counts from here: a connection slow to open is a slow answer.
    arm();
    const use = (s: Duplex) => {
      if (finished) return void s.destroy();
      socket = s;
      s.on("data", (chunk: Buffer) => step(() => reader.push(chunk), false));
      s.on("end", () => step(() => reader.end(), true));
      s.on("error", (err) => cut(err));
      // Not end(): a server may take a half-closed connection for a gone client and drop its answer.
      s.write(bytes);
    };
    try {
      const opened = target.open();
      if (opened instanceof Promise) void opened.then(use, (err: unknown) => finish(err as Error));
      else use(opened);
    } catch (err) {
      finish(err as Error);
    }
  });
}

/**
 * The outcome of each of `requests`, in order. More than one are pipelined (GETs and HEADs only: what a server did
 * not answer before it closed is sent again, on a connection of its own); a deadline or an abort fails
 * what it left unanswered, and keeps what was answered.
 */
export async function wireExchange(
  to: URL | WireTarget,
  requests: WireRequest[],
  signal: AbortSignal,
  answerMs?: number,
): Promise<WireAnswer[]> {
  if (requests.length > 1 && requests.some((r) => r.method !== "GET" && r.method !== "HEAD"))
    throw new Error("wireExchange: only GETs and HEADs are pipelined");
  const target = to instanceof URL ? urlTarget(to) : to;
  const { done, failure } = await oneConnection(target, requests, signal, answerMs);
  const rest = requests.slice(done.length);
  if (rest.length === 0) return done;
  if (failure) return [...done, ...rest.map(() => failure)];
  return [...done, ...(await wireExchange(target, rest, signal, answerMs))];
}
