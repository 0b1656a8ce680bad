// Every Docker Engine API call narwhal makes, each bounded by its own deadline
// (and the caller's AbortSignal). A call past its deadline fails with a
// retryable error that names the call; "already started/stopped" (304) is
// success and "no such container" (404) is an answer, not an error. How a
// failure is classified (retry, outwait, terminal) is docker-errors.ts.
import Docker from "dockerode";
import type { DockerTimeouts } from "../config.js";
import { NarwhalError } from "../errors.js";
import { DockerCallError, callFailure, deadlineExceeded } from "./docker-errors.js";
import { FrameDemux, type LogTail } from "./engine-log.js";
import { statusError, type DockerReads } from "./docker-reads.js";

export { DockerCallError, daemonUnavailable } from "./docker-errors.js";

type Kind = keyof DockerTimeouts;
// docker-modem calls back with an Error (a transport failure or a status it was told is one) or null.
type Dial = (o: object, cb: (e: Error | null, d: unknown) => void) => void;

export interface ContainerSummary {
  id: string;
  labels: Record<string, string>;
  state: string;
  created: number;
  names: string[];
}

export class DockerCalls {
  private client: Docker | undefined;

  /**
   * `dockerClient`: the endpoint's dockerode client, or how to make it at its first use (a no-op that only
   * reads never loads dockerode). `reads`: the observation's reads over narwhal's own HTTP client
   * (docker-reads.ts), when the endpoint has them; else dockerode makes them too.
   */
  constructor(
    private readonly dockerClient: Docker | (() => Docker),
    private readonly timeouts: DockerTimeouts,
    readonly endpoint: string,
    private readonly reads: DockerReads | null = null,
  ) {}

  get docker(): Docker {
    this.client ??= typeof this.dockerClient === "function" ? this.dockerClient() : this.dockerClient;
    return this.client;
  }

  /** Run one API call under its deadline; `extraMs` widens it (stop waits for the grace period). */
  async call<T>(
    kind: Kind,
    what: string,
    fn: (abortSignal: AbortSignal) => Promise<T>,
    signal?: AbortSignal,
    extraMs = 0,
  ): Promise<T> {
    const ms = this.timeouts[kind] + extraMs;
    const deadline = AbortSignal.timeout(ms);
    const abortSignal = signal ? AbortSignal.any([signal, deadline]) : deadline;
    try {
      return await fn(abortSignal);
    } catch (err) {
      if (deadline.aborted) throw deadlineExceeded(what, `NARWHAL_DOCKER_${kind.toUpperCase()}_MS`, ms, this.endpoint);
      if (signal?.aborted) throw signal.reason;
      // The transport's own typed errors (a ssh:// endpoint's node unreachable, its host key refused) say it best.
      if (err instanceof NarwhalError) throw err;
      throw callFailure(what, err, this.endpoint);
    }
  }

  /** call, with a 404 (no such image, container or path) as null. */
  private async callOrNull<T>(
    kind: Kind,
    what: string,
    fn: (abortSignal: AbortSignal) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<T | null> {
    try {
      return await this.call(kind, what, fn, signal);
    } catch (err) {
      if (err instanceof DockerCallError && err.statusCode === 404) return null;
      throw err;
    }
  }

  /** The raw API dial, for calls dockerode gives no AbortSignal or no stream. */
  private get dial(): Dial {
    const modem = this.docker.modem as unknown as { dial: Dial };
    return modem.dial.bind(modem);
  }

  ping(signal?: AbortSignal): Promise<unknown> {
    return this.call(
      "ping",
      "ping",
      (abortSignal) => (this.docker.ping as (o: object) => Promise<unknown>)({ abortSignal }),
      signal,
    );
  }

  async inspectImage(ref: string, signal?: AbortSignal): Promise<Docker.ImageInspectInfo | null> {
    // A name's slashes are the path's (registry/name@sha256:...), as docker-modem sends it.
    const path = `/images/${ref}/json`;
    // dockerode's Image.inspect takes no AbortSignal: dial the same endpoint through the modem, which does.
    return this.callOrNull(
      "inspect",
      `image inspect ${ref}`,
      (abortSignal) =>
        this.reads
          ? this.readJson<Docker.ImageInspectInfo>(this.reads, path, abortSignal)
          : new Promise<Docker.ImageInspectInfo>((resolve, reject) =>
              this.dial(
                {
                  path,
                  method: "GET",
                  abortSignal,
                  statusCodes: { 200: true, 404: "no such image", 500: "server error" },
                },
                (e, d) => (e ? reject(e) : resolve(d as Docker.ImageInspectInfo)),
              ),
            ),
      signal,
    );
  }

  async inspectContainer(id: string, signal?: AbortSignal): Promise<Docker.ContainerInspectInfo | null> {
    return this.callOrNull(
      "inspect",
      `container inspect ${id.slice(0, 12)}`,
      (abortSignal) =>
        this.reads
          ? this.readJson<Docker.ContainerInspectInfo>(
              this.reads,
              `/containers/${encodeURIComponent(id)}/json`,
              abortSignal,
            )
          : this.docker.getContainer(id).inspect({ abortSignal }),
      signal,
    );
  }

  async list(labels: string[], signal?: AbortSignal): Promise<ContainerSummary[]> {
    const found = await this.call(
      "list",
      "container list",
      (abortSignal) =>
        this.reads
          ? this.readJson<Docker.ContainerInfo[]>(
              this.reads,
              `/containers/json?all=true&filters=${encodeURIComponent(JSON.stringify({ label: labels }))}`,
              abortSignal,
            )
          : this.docker.listContainers({
              all: true,
              filters: { label: labels },
              abortSignal,
            } as Docker.ContainerListOptions),
      signal,
    );
    return found.map((c) => ({ id: c.Id, labels: c.Labels ?? {}, state: c.State, created: c.Created, names: c.Names }));
  }

  async create(opts: Docker.ContainerCreateOptions, signal?: AbortSignal): Promise<string> {
    const c = await this.call(
      "create",
      `container create ${opts.name ?? ""}`.trim(),
      (abortSignal) => this.docker.createContainer({ ...opts, abortSignal } as Docker.ContainerCreateOptions),
      signal,
    );
    return c.id;
  }

  async start(id: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.call(
        "start",
        `container start ${id.slice(0, 12)}`,
        (abortSignal) => this.docker.getContainer(id).start({ abortSignal }),
        signal,
      );
    } catch (err) {
      if (err instanceof DockerCallError && err.statusCode === 304) return; // already started
      throw err;
    }
  }

  async stop(id: string, graceSeconds: number, signal?: AbortSignal): Promise<void> {
    try {
      await this.call(
        "stop",
        `container stop ${id.slice(0, 12)}`,
        (abortSignal) => this.docker.getContainer(id).stop({ t: graceSeconds, abortSignal }),
        signal,
        graceSeconds * 1000,
      );
    } catch (err) {
      if (err instanceof DockerCallError && (err.statusCode === 304 || err.statusCode === 404)) return; // already stopped, or gone
      throw err;
    }
  }

  async remove(id: string, signal?: AbortSignal): Promise<void> {
    try {
      await this.call(
        "remove",
        `container remove ${id.slice(0, 12)}`,
        (abortSignal) => this.docker.getContainer(id).remove({ force: true, v: true, abortSignal }),
        signal,
      );
    } catch (err) {
      if (err instanceof DockerCallError && err.statusCode === 404) return;
      // 409 "removal already in progress" ends in the same place.
      if (err instanceof DockerCallError && err.statusCode === 409 && /already in progress/.test(err.message)) return;
      throw err;
    }
  }

  /** Rename a container (frees its name; the container and its log stay). */
  async rename(id: string, name: string, signal?: AbortSignal): Promise<void> {
    await this.call(
      "remove",
      `container rename ${id.slice(0, 12)}`,
      (abortSignal) => this.docker.getContainer(id).rename({ name, abortSignal }),
      signal,
    );
  }

  async putArchive(id: string, tar: Buffer, dir: string, signal?: AbortSignal): Promise<void> {
    await this.call(
      "create",
      `container archive upload ${id.slice(0, 12)}`,
      (abortSignal) => this.docker.getContainer(id).putArchive(tar, { path: dir, abortSignal } as object),
      signal,
    );
  }

  /**
   * One path's stat in a container (HEAD /containers/{id}/archive: the daemon answers from a stat,
   * where a download spawns a tar helper per call); null when the path does not exist.
   */
  async statPath(id: string, file: string, signal?: AbortSignal): Promise<Record<string, unknown> | null> {
    return this.callOrNull(
      "inspect",
      `container path stat ${id.slice(0, 12)} ${file}`,
      async (abortSignal) => {
        const header = this.reads
          ? await this.statHeader(this.reads, id, file, abortSignal)
          : await this.docker
              .getContainer(id)
              .infoArchive({ path: file, abortSignal } as { path: string })
              .then((r) => {
                const res = r as NodeJS.ReadableStream & { headers?: Record<string, string | string[] | undefined> };
                res.resume(); // a HEAD has no body; drained so the connection is released
                return res.headers?.["x-docker-container-path-stat"];
              });
        if (typeof header !== "string")
          throw new Error("the daemon's answer has no X-Docker-Container-Path-Stat header");
        return JSON.parse(Buffer.from(header, "base64").toString("utf8")) as Record<string, unknown>;
      },
      signal,
    );
  }

  /** A GET of the API through `reads`: its JSON on 200, else the daemon's status as dockerode reports it. */
  private async readJson<T>(reads: DockerReads, path: string, signal: AbortSignal): Promise<T> {
    const r = await reads.request("GET", path, signal);
    if (r.status !== 200) throw statusError(r);
    return JSON.parse(r.body.toString("utf8")) as T;
  }

  /** HEAD /containers/{id}/archive through `reads`: the path's stat header (a 404 is the daemon's error). */
  private async statHeader(
    reads: DockerReads,
    id: string,
    file: string,
    signal: AbortSignal,
  ): Promise<string | undefined> {
    const r = await reads.request(
      "HEAD",
      `/containers/${encodeURIComponent(id)}/archive?path=${encodeURIComponent(file)}`,
      signal,
    );
    if (r.status !== 200) throw statusError(r);
    return r.headers["x-docker-container-path-stat"];
  }

  /** One path of a container's filesystem as a tar stream, read up to `maxBytes` (null: the path does not exist). */
  async getArchive(id: string, file: string, maxBytes: number, signal?: AbortSignal): Promise<Buffer | null> {
    return this.callOrNull(
      "inspect",
      `container archive download ${id.slice(0, 12)} ${file}`,
      async (abortSignal) => {
        const stream = (await this.docker
          .getContainer(id)
          .getArchive({ path: file, abortSignal } as { path: string })) as NodeJS.ReadableStream;
        const parts: Buffer[] = [];
        let size = 0;
        for await (const chunk of stream) {
          parts.push(chunk as Buffer);
          size += (chunk as Buffer).length;
          if (size >= maxBytes) break; // a bounded read: what we compare is a few bytes, never a stranger's large file
        }
        return Buffer.concat(parts);
      },
      signal,
    );
  }

  async wait(id: string, signal?: AbortSignal): Promise<number> {
    const out = await this.call(
      "check",
      `container wait ${id.slice(0, 12)}`,
      (abortSignal) => this.docker.getContainer(id).wait({ abortSignal }),
      signal,
    );
    return (out as { StatusCode: number }).StatusCode;
  }

  /**
   * Stream a container's log (stdout and stderr, not following) into a bounded sink: the whole
   * log is never held. Past the deadline the sink keeps what arrived and the call fails as any
   * other does, so the caller knows the copy is partial. `tailLines`: only the log's last lines.
   */
  async readLog(id: string, sink: LogTail, signal?: AbortSignal, tailLines?: number): Promise<void> {
    await this.call(
      "logs",
      `container logs ${id.slice(0, 12)}`,
      (abortSignal) =>
        new Promise<void>((resolve, reject) =>
          this.dial(
            {
              path: `/containers/${id}/logs?`,
              method: "GET",
              abortSignal,
              isStream: true,
              statusCodes: { 200: true, 404: "no such container", 500: "server error" },
              options: { stdout: true, stderr: true, follow: false, ...(tailLines ? { tail: tailLines } : {}) },
            },
            (e, d) => {
              if (e) return reject(e);
              const stream = d as NodeJS.ReadableStream & { destroy(): void };
              const demux = new FrameDemux();
              const abort = () => {
                stream.destroy();
                reject(abortSignal.reason);
              };
              abortSignal.addEventListener("abort", abort, { once: true });
              stream.on("data", (chunk: Buffer) => {
                for (const part of demux.push(chunk)) sink.push(part);
              });
              stream.on("error", reject);
              stream.on("end", () => {
                for (const part of demux.end()) sink.push(part);
                abortSignal.removeEventListener("abort", abort);
                resolve();
              });
              // A connection dropped mid-log ends without "end": the copy is partial (settling twice is a no-op).
              stream.on("close", () => reject(new Error("the log stream closed before its end")));
            },
          ),
        ),
      signal,
    );
  }
}
