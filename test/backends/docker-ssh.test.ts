// A ssh:// endpoint's transport without the ssh: the agent whose connections are
// a child's stdio (childStream), here a local relay to a unix-socket daemon, as
// `docker system dial-stdio` is on a node. Its exits are what a call fails with:
// the daemon away on the node is outwaited, a node without the docker CLI is
// terminal with the fix, both naming the node. (Over real ssh to real daemons:
// test/e2e-docker/container-rig.test.ts.)
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerCalls, DockerCallError } from "../../src/backends/docker-calls.js";
import { dialStdioFailure, MAX_CONNECTIONS, streamAgent } from "../../src/backends/docker-ssh.js";
import { loadConfig } from "../../src/config.js";
import { NarwhalError } from "../../src/errors.js";
import { childStream } from "../../src/hosts/ssh-stream.js";

const ENDPOINT = "ssh://root@gpu-b";
const timeouts = loadConfig({}, {}).docker.timeouts;

/** stdin to the socket, the socket to stdout: what dial-stdio does with the node's daemon socket. */
const RELAY = `
import socket, sys, threading
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
def up():
    while (b := sys.stdin.buffer.read1(65536)): s.sendall(b)
    s.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while (b := s.recv(65536)): sys.stdout.buffer.write(b); sys.stdout.buffer.flush()
`;

/** Streams open now, and the most ever open at once. */
interface StreamCount {
  open: number;
  most: number;
}

/** DockerCalls whose every connection runs argv, its stdio the connection, counted in `streams`. */
function callsOver(argv: string[], streams: StreamCount = { open: 0, most: 0 }, pingMs = timeouts.ping): DockerCalls {
  const agent = streamAgent(async () => {
    const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ["pipe", "pipe", "pipe"] });
    streams.most = Math.max(streams.most, ++streams.open);
    child.once("close", () => streams.open--);
    return childStream(child, (r) => dialStdioFailure("gpu-b", ENDPOINT, r));
  });
  const docker = new Docker({ protocol: "http", host: "gpu-b", port: 22, agent } as Docker.DockerOptions);
  return new DockerCalls(docker, { ...timeouts, ping: pingMs }, ENDPOINT);
}

describe("a ssh:// endpoint's connections are a remote command's stdio", () => {
  let dir = "";
  let daemon: http.Server;
  const seen: string[] = [];

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-dial-"));
    daemon = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("OK");
    });
    await new Promise<void>((r) => daemon.listen(path.join(dir, "docker.sock"), r));
  });
  afterAll(async () => {
    daemon.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("carries each call over a stream of its own to the daemon", async () => {
    const c = callsOver(["python3", "-c", RELAY, path.join(dir, "docker.sock")]);
    await c.ping();
    await c.ping();
    expect(seen.filter((s) => s.endsWith("/_ping"))).toHaveLength(2);
  });

  it("keeps at most MAX_CONNECTIONS streams open at once: sessions on one master are limited (sshd MaxSessions 10)", async () => {
    const streams = { open: 0, most: 0 };
    // A call waiting for a stream waits within its own deadline: ample here, where each relay starts a python.
    const c = callsOver(["python3", "-c", RELAY, path.join(dir, "docker.sock")], streams, 60_000);
    await Promise.all(Array.from({ length: 2 * MAX_CONNECTIONS }, () => c.ping()));
    expect(streams.most).toBeGreaterThan(1); // calls do run side by side
    expect(streams.most).toBeLessThanOrEqual(MAX_CONNECTIONS);
  });

  it("outwaits a node whose daemon is not answering, naming the node", async () => {
    const said = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?";
    const err: unknown = await callsOver(["sh", "-c", `echo '${said}' >&2; exit 1`])
      .ping()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DockerCallError);
    expect(err).toMatchObject({ failure: "outwait" });
    expect((err as Error).message).toMatch(/node gpu-b: docker system dial-stdio exited 1: Cannot connect/);
  });

  it("a node without the docker CLI is terminal, with the fix", async () => {
    const err: unknown = await callsOver(["sh", "-c", "echo 'sh: 1: exec: docker: not found' >&2; exit 127"])
      .ping()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NarwhalError);
    expect(err).not.toBeInstanceOf(DockerCallError);
    expect(err).toMatchObject({ failure: "terminal", input: `docker_host ${ENDPOINT}` });
    expect((err as NarwhalError).fix).toMatch(/Install the Docker CLI on node gpu-b/);
  });

  it("any other failed exit is retried", async () => {
    const err: unknown = await callsOver(["sh", "-c", "echo 'broken pipe' >&2; exit 1"])
      .ping()
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ failure: "retry" });
  });
});
