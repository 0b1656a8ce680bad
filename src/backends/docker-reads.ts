// The Docker Engine API reads (the labelled container list, each container's
// key-file stat, container and image inspects), over narwhal's HTTP/1.1 client
// (phases/http-wire.ts) instead of dockerode: a node:http request costs ~1 ms of
// CPU, and dockerode's load a no-op that only reads. Writes, streams and
// everything else stay dockerode's (docker-calls.ts). Only GET and HEAD go here:
// both can be sent again on a fresh connection if a server closes early.
//
// On a ssh:// endpoint a connection is an ssh session and a `docker system
// dial-stdio` on the node: a resync's stat of every engine's key file was one
// each (a no-op of 16 containers on a node: 17). There, reads made while a
// connection is out are pipelined together on the next one. Not elsewhere: the
// daemon answers a connection's requests in turn, so a read that waits (a stat or
// an inspect, for a container's lock another operation holds) would hold the
// reads behind it until the answer deadline; a unix or tcp connection is cheap enough to give each
// read its own.
import net from "node:net";
import type { Duplex } from "node:stream";
import type { DockerOptions } from "dockerode";
import { wireExchange, type WireRequest, type WireResponse, type WireTarget } from "../phases/http-wire.js";

/** Requests on one connection at most: a batch past it waits for the next. */
const MAX_PIPELINED = 64;

interface Pending {
  req: WireRequest;
  signal: AbortSignal;
  settled: boolean;
  /** The request's own abort (removed once it is answered). */
  onAbort: () => void;
  resolve(r: WireResponse): void;
  reject(e: unknown): void;
}

/** A status the daemon answered with, as dockerode reports one: the code and the daemon's message. */
export function statusError(r: WireResponse): Error & { statusCode: number } {
  let said = "";
  try {
    said = (JSON.parse(r.body.toString("utf8")) as { message?: string }).message ?? "";
  } catch {
    said = r.body.toString("utf8").trim().slice(0, 200);
  }
  return Object.assign(new Error(`(HTTP code ${r.status}) ${said || "no message"}`), { statusCode: r.status });
}

export class DockerReads {
  private queue: Pending[] = [];
  private draining = false;

  /**
   * `answerMs`: how long each answer on a connection may take after the one before it. `pipelined`:
   * reads queue for a shared connection (else each has its own).
   */
  constructor(
    private readonly target: WireTarget,
    private readonly answerMs: number,
    private readonly pipelined: boolean,
  ) {}

  /**
   * One GET or HEAD of the API (`path` with its query). Resolves with the daemon's answer whatever its
   * status; rejects with why there is none (the connection's failure, `signal`'s reason).
   */
  async request(method: "GET" | "HEAD", path: string, signal: AbortSignal): Promise<WireResponse> {
    signal.throwIfAborted();
    if (!this.pipelined) {
      const [answer] = await wireExchange(this.target, [{ method, path, headers: {} }], signal, this.answerMs);
      if (answer instanceof Error || answer === undefined) throw answer ?? new Error("no answer");
      return answer;
    }
    return new Promise<WireResponse>((resolve, reject) => {
      const p: Pending = {
        req: { method, path, headers: {} },
        signal,
        settled: false,
        // An abort answers its own request at once; the connection it rides goes on for the others.
        onAbort: () => this.settle(p, () => reject(signal.reason)),
        resolve: (r) => this.settle(p, () => resolve(r)),
        reject: (e) => this.settle(p, () => reject(e)),
      };
      signal.addEventListener("abort", p.onAbort, { once: true });
      this.queue.push(p);
      if (!this.draining) void this.drain();
    });
  }

  /** Answer `p` once (`f` resolves or rejects it); its abort listener goes with the first answer. */
  private settle(p: Pending, f: () => void): void {
    if (p.settled) return;
    p.settled = true;
    p.signal.removeEventListener("abort", p.onAbort);
    f();
  }

  /** Send what is queued, a connection at a time, until nothing is. Never rejects. */
  private async drain(): Promise<void> {
    this.draining = true;
    // The reads of one turn (every engine's, as a resync observes them together) go on one connection.
    await new Promise<void>((r) => setImmediate(r));
    try {
      for (;;) {
        this.queue = this.queue.filter((p) => !p.settled);
        if (this.queue.length === 0) return;
        const batch = this.queue.splice(0, MAX_PIPELINED);
        // The connection ends early once every request on it has been aborted.
        const stop = new AbortController();
        const onAbort = () => batch.every((p) => p.settled) && stop.abort(new Error("every read on it was aborted"));
        for (const p of batch) p.signal.addEventListener("abort", onAbort, { once: true });
        const answers = await wireExchange(
          this.target,
          batch.map((p) => p.req),
          stop.signal,
          this.answerMs,
        ).catch((err: unknown) => batch.map(() => err as Error));
        batch.forEach((p, i) => {
          p.signal.removeEventListener("abort", onAbort);
          const a = answers[i];
          if (a instanceof Error || a === undefined) p.reject(a ?? new Error("no answer"));
          else p.resolve(a);
        });
      }
    } finally {
      this.draining = false;
    }
  }
}

/** Where an endpoint's reads go, and whether they share connections (see the top of this file). */
export interface ReadsRoute {
  target: WireTarget;
  pipelined: boolean;
}

/**
 * The reads' route for an endpoint's dockerode options (docker-endpoint.ts): its unix socket, or its plain
 * HTTP host and port, connected directly; `dial` for a ssh:// one (a dial-stdio stream on the node,
 * docker-ssh.ts), pipelined; null for TLS, which stays dockerode's.
 */
export function readsRoute(opts: DockerOptions, dial: (() => Promise<Duplex>) | null): ReadsRoute | null {
  if (opts.socketPath) {
    const socketPath = opts.socketPath;
    return { target: { host: "docker", open: () => net.connect({ path: socketPath }) }, pipelined: false };
  }
  if (opts.protocol === "https") return null;
  if (dial) return { target: { host: "docker", open: dial }, pipelined: true };
  const host = opts.host ?? "localhost";
  const port = Number(opts.port ?? 2375);
  const hostHeader = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
  return { target: { host: hostHeader, open: () => net.connect({ host, port }) }, pipelined: false };
}

/** The reads of an endpoint (null: dockerode makes them); each answer within `answerMs` of the one before. */
export function dockerReads(route: ReadsRoute | null, answerMs: number): DockerReads | null {
  return route && new DockerReads(route.target, answerMs, route.pipelined);
}
