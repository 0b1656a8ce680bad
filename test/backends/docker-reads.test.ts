// The observation's Docker reads over narwhal's own HTTP client, against a real
// HTTP server on a unix socket (node:http, which answers pipelined requests in
// order, as dockerd's Go server does): the reads of one turn share a connection,
// reads made while it is out share the next, an abort answers its own read only.
// Pipelined over ssh to a real dockerd: test/e2e-docker/container-rig.test.ts (and
// every container e2e test lists and stats through these reads).
import fs from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { Duplex } from "node:stream";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DockerReads, readsRoute, statusError } from "../../src/backends/docker-reads.js";

let dir = "";
let socket = "";
let server: http.Server;
let connections = 0;
const seen: string[] = [];
/** While set, the server answers nothing until it is resolved. */
let hold: Promise<void> | null = null;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-reads-"));
  socket = path.join(dir, "d.sock");
  server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    void (hold ?? Promise.resolve()).then(() => {
      if (req.url!.startsWith("/missing")) {
        res.writeHead(404, { "Content-Type": "application/json" });
        return res.end(JSON.stringify({ message: "no such container: missing" }));
      }
      const body = JSON.stringify({ url: req.url });
      // A HEAD's answer carries the GET's length and no body, as dockerd's does.
      res.writeHead(200, { "X-Path-Stat": `stat of ${req.url}`, "Content-Length": Buffer.byteLength(body) });
      res.end(req.method === "HEAD" ? undefined : body);
    });
  });
  server.on("connection", () => connections++);
  await new Promise<void>((r) => server.listen(socket, r));
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
  await fs.rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  connections = 0;
  seen.length = 0;
  hold = null;
});

/** Pipelined, as a ssh:// endpoint's are, here on a unix socket's connections. */
const reads = (socketPath = socket) => new DockerReads(readsRoute({ socketPath }, null)!.target, 5_000, true);
const never = () => new AbortController().signal;

/** Resolves once the server has seen `n` requests (it records each as it parses it). */
async function seenAtLeast(n: number): Promise<void> {
  while (seen.length < n) await new Promise((r) => setTimeout(r, 5));
}

describe("DockerReads", () => {
  it("sends the reads of one turn on one connection, each answered: a HEAD's without a body", async () => {
    const r = reads();
    const answers = await Promise.all([
      r.request("GET", "/containers/json?all=true", never()),
      ...Array.from({ length: 8 }, (_, i) => r.request("HEAD", `/containers/c${i}/archive?path=%2Fk`, never())),
      r.request("GET", "/missing/json", never()),
    ]);
    expect(connections).toBe(1);
    expect(answers[0]!.status).toBe(200);
    expect(JSON.parse(answers[0]!.body.toString())).toEqual({ url: "/containers/json?all=true" });
    for (let i = 0; i < 8; i++) {
      expect(answers[1 + i]!.status).toBe(200);
      expect(answers[1 + i]!.body.length).toBe(0);
      expect(answers[1 + i]!.headers["x-path-stat"]).toBe(`stat of /containers/c${i}/archive?path=%2Fk`);
    }
    expect(answers[9]!.status).toBe(404);
    const err = statusError(answers[9]!);
    expect(err.statusCode).toBe(404);
    expect(err.message).toBe("(HTTP code 404) no such container: missing");
  });

  it("sends the reads made while a connection is out together on the next one", async () => {
    let release = () => {};
    hold = new Promise((r) => (release = r));
    const r = reads();
    const first = r.request("HEAD", "/first", never());
    await seenAtLeast(1);
    const later = Array.from({ length: 5 }, (_, i) => r.request("HEAD", `/later-${i}`, never()));
    release();
    hold = null;
    expect((await first).status).toBe(200);
    expect((await Promise.all(later)).map((a) => a.headers["x-path-stat"])).toEqual(
      Array.from({ length: 5 }, (_, i) => `stat of /later-${i}`),
    );
    expect(connections).toBe(2);
  });

  it("rejects an aborted read with its reason at once; the others on its connection are answered", async () => {
    let release = () => {};
    hold = new Promise((r) => (release = r));
    const r = reads();
    const aborter = new AbortController();
    const gone = r.request("HEAD", "/aborted", aborter.signal);
    const kept = r.request("HEAD", "/kept", never());
    await seenAtLeast(1);
    aborter.abort(new Error("the step was cancelled"));
    await expect(gone).rejects.toThrow("the step was cancelled");
    release();
    expect((await kept).headers["x-path-stat"]).toBe("stat of /kept");
    expect(connections).toBe(1);
  });

  it("fails every read of a socket with nothing behind it with ENOENT", async () => {
    const r = reads(path.join(dir, "none.sock"));
    const out = await Promise.allSettled([r.request("GET", "/a", never()), r.request("HEAD", "/b", never())]);
    for (const o of out) expect(o).toMatchObject({ status: "rejected", reason: { code: "ENOENT" } });
  });
});

describe("readsRoute", () => {
  it("leaves TLS endpoints to dockerode, pipelines only ssh:// ones (dialled with the stream it is given)", async () => {
    expect(readsRoute({ host: "10.0.0.1", port: 2376, protocol: "https" }, null)).toBeNull();
    const stream = new Duplex({ read() {}, write: (_c, _e, done) => done() });
    const ssh = readsRoute({ host: "gpu-b", port: 22, protocol: "http" }, () => Promise.resolve(stream))!;
    expect(ssh.pipelined).toBe(true);
    expect(await ssh.target.open()).toBe(stream);
    stream.destroy();
    const tcp = readsRoute({ host: "fd00::1", port: 2375, protocol: "http" }, null)!;
    expect(tcp).toMatchObject({ pipelined: false, target: { host: "[fd00::1]:2375" } });
    expect(readsRoute({ socketPath: socket }, null)!.pipelined).toBe(false);
  });

  it("gives each read of an endpoint it does not pipeline a connection of its own", async () => {
    const r = new DockerReads(readsRoute({ socketPath: socket }, null)!.target, 5_000, false);
    const answers = await Promise.all(Array.from({ length: 4 }, (_, i) => r.request("HEAD", `/own-${i}`, never())));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(connections).toBe(4);
  });
});
