// Reading HTTP/1.1 responses from a connection's bytes, in order (http-wire.ts
// pipelines several requests on one connection): each ends at its
// Content-Length, at its last chunk, or, having neither, at the server's close.
// Interim answers (100 Continue, 103 Early Hints) are skipped; what is not an
// HTTP response is refused as soon as its first bytes say so.

export interface WireResponse {
  status: number;
  /** Header names in lower case; a header sent more than once, its values joined with ", ". */
  headers: Record<string, string>;
  body: Buffer;
}

const EMPTY = Buffer.alloc(0);
const HEADER_END = Buffer.from("\r\n\r\n");
const HTTP = Buffer.from("HTTP/");

function malformed(why: string): Error {
  return Object.assign(new Error(`malformed HTTP response: ${why}`), { code: "HPE_INVALID" });
}

interface Head {
  status: number;
  headers: Record<string, string>;
  /** null: chunked, or read to the close. */
  length: number | null;
  chunked: boolean;
  bodyStart: number;
}

function parseHead(buf: Buffer, end: number, bodiless: boolean): Head {
  const [statusLine = "", ...lines] = buf.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.[01] (\d{3})(?: |$)/.exec(statusLine);
  if (!m) throw malformed(`status line ${JSON.stringify(statusLine.slice(0, 80))}`);
  const status = Number(m[1]);
  let length: number | null = null;
  let chunked = false;
  const headers: Record<string, string> = {};
  for (const line of lines) {
    if (/^[ \t]/.test(line)) continue; // an obsolete folded continuation: of no header read here
    const colon = line.indexOf(":");
    if (colon <= 0) throw malformed(`header line ${JSON.stringify(line.slice(0, 80))}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    if (name === "content-length") {
      if (!/^\d+$/.test(value) || (length !== null && Number(value) !== length))
        throw malformed(`Content-Length ${JSON.stringify(value)}`);
      length = Number(value);
    } else if (name === "transfer-encoding") {
      chunked = value.toLowerCase().split(",").at(-1)?.trim() === "chunked";
    }
  }
  const bodyStart = end + HEADER_END.length;
  // 204 and 304 have no body whatever their headers say; nor has the answer to a HEAD.
  if (status === 204 || status === 304 || bodiless) return { status, headers, length: 0, chunked: false, bodyStart };
  return { status, headers, length: chunked ? null : length, chunked, bodyStart };
}

/** A whole chunked body decoded and where it ends (after its trailers); null when not all of it came yet. */
function dechunk(buf: Buffer): { body: Buffer; end: number } | null {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = buf.indexOf("\r\n", at, "latin1");
    if (eol < 0) return null;
    const sizeText = buf.subarray(at, eol).toString("latin1").split(";")[0]!.trim();
    // At most 2^31 - 1 (eight hex digits less the top bit): a larger size is no real chunk, and would only wait.
    if (!/^[0-9a-fA-F]{1,8}$/.test(sizeText) || parseInt(sizeText, 16) > 0x7fffffff)
      throw malformed(`chunk size ${JSON.stringify(sizeText.slice(0, 20))}`);
    const size = parseInt(sizeText, 16);
    if (size === 0) {
      // Trailer lines, if any, up to an empty one.
      let line = eol + 2;
      for (;;) {
        const next = buf.indexOf("\r\n", line, "latin1");
        if (next < 0) return null;
        if (next === line) return { body: Buffer.concat(parts), end: next + 2 };
        line = next + 2;
      }
    }
    if (buf.length < eol + 2 + size + 2) return null;
    // The chunk's data ends with a CRLF: anything else is a chunk that is not the size it says.
    if (buf[eol + 2 + size] !== 0x0d || buf[eol + 2 + size + 1] !== 0x0a) throw malformed("chunk longer than its size");
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/** The responses of one connection, in order, from its bytes as they come. */
export class ResponseReader {
  /** Responses read whole so far. */
  readonly done: WireResponse[] = [];
  private headBuf: Buffer = EMPTY;
  private head: Head | null = null;
  // The body's chunks are joined once it is whole, not as they come (a /metrics page comes in many).
  private body: Buffer[] = [];
  private bodyBytes = 0;
  /** The body's last three bytes: a chunked body ends in CRLF CRLF, looked for across chunks. */
  private tail: Buffer = EMPTY;

  /**
   * `want`: how many responses the connection is to carry; bytes after the last are not read.
   * `bodiless(i)`: whether the i-th answers a HEAD (its Content-Length is the GET's, and no body follows).
   */
  constructor(
    private readonly want: number,
    private readonly bodiless: (i: number) => boolean = () => false,
  ) {}

  push(chunk: Buffer): void {
    let rest: Buffer | null = chunk;
    while (rest !== null && this.done.length < this.want) rest = this.take(rest);
  }

  /** The server closed: what came is the last response if it has no length of its own; else it was cut. */
  end(): void {
    if (!this.head) {
      if (this.headBuf.length > 0 && this.done.length === 0) throw hangUp();
      return;
    }
    if (!this.head.chunked && this.head.length === null) return this.complete(Buffer.concat(this.body, this.bodyBytes));
    // Cut short: the responses before it stand (a pipelined request is sent again), a first one fails.
    if (this.done.length === 0) throw hangUp();
  }

  /** Take bytes; returns those that belong to the next response, or null when all were taken. */
  private take(chunk: Buffer): Buffer | null {
    if (!this.head) {
      this.headBuf = this.headBuf.length === 0 ? chunk : Buffer.concat([this.headBuf, chunk]);
      // Not HTTP at all (another service on the port): said at once, not at the deadline.
      if (this.headBuf.length >= HTTP.length && !this.headBuf.subarray(0, HTTP.length).equals(HTTP))
        throw malformed(
          `status line ${JSON.stringify(this.headBuf.toString("latin1").split("\r\n")[0]!.slice(0, 80))}`,
        );
      const end = this.headBuf.indexOf(HEADER_END);
      if (end < 0) return null;
      const head = parseHead(this.headBuf, end, this.bodiless(this.done.length));
      const rest = this.headBuf.subarray(head.bodyStart);
      this.headBuf = EMPTY;
      // An interim answer (100 Continue, 103 Early Hints) precedes the one that counts; 101 would be final.
      if (head.status >= 100 && head.status < 200 && head.status !== 101) return rest.length > 0 ? rest : null;
      this.head = head;
      chunk = rest;
    }
    // Whether these bytes (with the three before them) hold a CRLF CRLF, where a chunked body may end:
    // only then is it decoded, not at every chunk of a long one.
    const mayEnd = chunk.includes(HEADER_END) || Buffer.concat([this.tail, chunk.subarray(0, 3)]).includes(HEADER_END);
    if (chunk.length > 0) {
      this.body.push(chunk);
      this.bodyBytes += chunk.length;
      this.tail = Buffer.concat([this.tail, chunk.subarray(-3)]).subarray(-3);
    }
    const { head } = this;
    if (head.chunked) {
      if (!mayEnd) return null;
      const all = Buffer.concat(this.body, this.bodyBytes);
      const decoded = dechunk(all);
      if (!decoded) return null;
      this.complete(decoded.body);
      return rest(all, decoded.end);
    }
    if (head.length === null || this.bodyBytes < head.length) return null;
    const all = Buffer.concat(this.body, this.bodyBytes);
    this.complete(all.subarray(0, head.length));
    return rest(all, head.length);
  }

  private complete(body: Buffer): void {
    this.done.push({ status: this.head!.status, headers: this.head!.headers, body });
    this.head = null;
    this.body = [];
    this.bodyBytes = 0;
    this.tail = EMPTY;
  }
}

const rest = (all: Buffer, from: number): Buffer | null => (all.length > from ? all.subarray(from) : null);

/** A connection cut before a whole response: the error node:http gives. */
export function hangUp(): Error {
  return Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
}
