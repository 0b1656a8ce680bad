// One HTTP/1.1 exchange on a connection of its own, over node:net: what every
// resync spends per engine on its /v1/models requests (and the probes, the
// start's health wait and the KV proofs on theirs). node:http builds a
// ClientRequest, an agent's socket bookkeeping and an IncomingMessage stream
// per request: 0.5-0.65 ms of CPU each against 0.3 ms so (fresh connections to
// the simulator, this 2-core machine, side by side); a no-op of 64 engines went
// from 0.468 to 0.429 s. The response is read as node:http would: to its
// Content-Length, to its last chunk, or to the server's close.
import net from "node:net";

export interface WireResponse {
  status: number;
  body: Buffer;
}

const HEADER_END = Buffer.from("\r\n\r\n");
const HTTP = Buffer.from("HTTP/");
/** A chunked body's last chunk without trailers (what servers send): its end, before the server closes. */
const LAST_CHUNK = Buffer.from("0\r\n\r\n");

/** A connection cut before a whole response: the error node:http gives. */
function hangUp(): Error {
  return Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
}

function malformed(why: string): Error {
  return Object.assign(new Error(`malformed HTTP response: ${why}`), { code: "HPE_INVALID" });
}

interface Head {
  status: number;
  /** null: chunked, or read to the close. */
  length: number | null;
  chunked: boolean;
  bodyStart: number;
}

function parseHead(buf: Buffer, end: number): Head {
  const [statusLine = "", ...lines] = buf.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(statusLine);
  if (!m) throw malformed(`status line ${JSON.stringify(statusLine.slice(0, 80))}`);
  let length: number | null = null;
  let chunked = false;
  for (const line of lines) {
    if (/^[ \t]/.test(line)) continue; // an obsolete folded continuation: of no header read here
    const colon = line.indexOf(":");
    if (colon <= 0) throw malformed(`header line ${JSON.stringify(line.slice(0, 80))}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === "content-length") {
      if (!/^\d+$/.test(value) || (length !== null && Number(value) !== length))
        throw malformed(`Content-Length ${JSON.stringify(value)}`);
      length = Number(value);
    } else if (name === "transfer-encoding") {
      chunked = value.toLowerCase().split(",").at(-1)?.trim() === "chunked";
    }
  }
  return { status: Number(m[1]), length: chunked ? null : length, chunked, bodyStart: end + HEADER_END.length };
}

/** A whole chunked body decoded (trailers are not read); null when it ends before its last chunk. */
function dechunk(buf: Buffer): Buffer | null {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = buf.indexOf("\r\n", at, "latin1");
    if (eol < 0) return null;
    const sizeText = buf.subarray(at, eol).toString("latin1").split(";")[0]!.trim();
    if (!/^[0-9a-fA-F]+$/.test(sizeText)) throw malformed(`chunk size ${JSON.stringify(sizeText.slice(0, 20))}`);
    const size = parseInt(sizeText, 16);
    if (size === 0) return Buffer.concat(parts);
    if (buf.length < eol + 2 + size + 2) return null;
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** The request's head; a header that would split it (CR or LF in a name or value) is refused, as node:http does. */
function requestHead(target: URL, method: string, headers: Record<string, string>): string {
  const lines = [`${method} ${target.pathname}${target.search} HTTP/1.1`, `Host: ${target.host}`, "Connection: close"];
  for (const [name, value] of Object.entries(headers)) {
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value))
      throw Object.assign(new TypeError(`Invalid character in header content ["${name}"]`), {
        code: "ERR_INVALID_CHAR",
      });
    lines.push(`${name}: ${value}`);
  }
  return `${lines.join("\r\n")}\r\n\r\n`;
}

/**
 * Send one request on a fresh connection (Connection: close) and read its response. Aborting
 * `signal` destroys the connection and rejects with its reason; a connection that fails rejects with
 * its error (connect ECONNREFUSED 127.0.0.1:8100), one closed before a whole response with "socket
 * hang up".
 */
export function wireRequest(
  target: URL,
  method: string,
  headers: Record<string, string>,
  payload: string | undefined,
  signal: AbortSignal,
): Promise<WireResponse> {
  const head = requestHead(target, method, headers);
  return new Promise<WireResponse>((resolve, reject) => {
    const socket = net.connect({ host: target.hostname.replace(/^\[|\]$/g, ""), port: Number(target.port || 80) });
    // The head is parsed from one buffer (a few hundred bytes); the body's chunks are joined once, at its end.
    let headBuf: Buffer = Buffer.alloc(0);
    let parsed: Head | null = null;
    const body: Buffer[] = [];
    let bodyBytes = 0;
    /** The body's last bytes, across chunks: where a chunked body's end is looked for. */
    let tail: Buffer = Buffer.alloc(0);
    const finish = (outcome: () => void) => {
      signal.removeEventListener("abort", onAbort);
      socket.removeAllListeners("data");
      socket.destroy();
      outcome();
    };
    const onAbort = () => finish(() => reject(signal.reason));
    signal.addEventListener("abort", onAbort, { once: true });
    const takeBody = (chunk: Buffer) => {
      body.push(chunk);
      bodyBytes += chunk.length;
      tail = Buffer.concat([tail, chunk.subarray(-(LAST_CHUNK.length + 2))]).subarray(-(LAST_CHUNK.length + 2));
    };
    /** The response once whole (at the close, `atEof`, what came is whole unless it says otherwise). */
    const whole = (chunk: Buffer, atEof: boolean): WireResponse | null => {
      if (!parsed) {
        headBuf = headBuf.length === 0 ? chunk : Buffer.concat([headBuf, chunk]);
        for (;;) {
          // Not HTTP at all (another service on the port): said at once, not at the deadline.
          if (headBuf.length >= HTTP.length && !headBuf.subarray(0, HTTP.length).equals(HTTP))
            throw malformed(`status line ${JSON.stringify(headBuf.toString("latin1").split("\r\n")[0]!.slice(0, 80))}`);
          const end = headBuf.indexOf(HEADER_END);
          if (end < 0) return null;
          const h = parseHead(headBuf, end);
          const rest = headBuf.subarray(h.bodyStart);
          // An interim answer (100 Continue, 103 Early Hints) precedes the one that counts.
          if (h.status >= 100 && h.status < 200) {
            headBuf = rest;
            continue;
          }
          parsed = h;
          takeBody(rest);
          break;
        }
      } else takeBody(chunk);
      if (parsed.chunked) {
        // "0" alone on its line: the body's start, or after the CRLF that ends a chunk.
        const ends =
          tail.subarray(-LAST_CHUNK.length).equals(LAST_CHUNK) &&
          (bodyBytes === LAST_CHUNK.length || tail.subarray(0, 2).toString("latin1") === "\r\n");
        if (!ends && !atEof) return null;
        const decoded = dechunk(Buffer.concat(body, bodyBytes));
        return decoded ? { status: parsed.status, body: decoded } : null;
      }
      if (parsed.length !== null && bodyBytes >= parsed.length)
        return { status: parsed.status, body: Buffer.concat(body, bodyBytes).subarray(0, parsed.length) };
      return atEof && parsed.length === null ? { status: parsed.status, body: Buffer.concat(body, bodyBytes) } : null;
    };
    const settle = (chunk: Buffer, atEof: boolean) => {
      let res: WireResponse | null;
      try {
        res = whole(chunk, atEof);
      } catch (err) {
        return finish(() => reject(err as Error));
      }
      if (res) finish(() => resolve(res));
      else if (atEof) finish(() => reject(hangUp()));
    };
    socket.setNoDelay(true);
    // Not end(): a server may take a half-closed connection for a gone client and drop its answer.
    socket.on("connect", () => socket.write(payload === undefined ? head : head + payload));
    socket.on("data", (chunk: Buffer) => settle(chunk, false));
    socket.on("end", () => settle(Buffer.alloc(0), true));
    socket.on("error", (err) => finish(() => reject(err)));
  });
}
