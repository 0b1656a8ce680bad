// How a Docker call's failure is classed, against endpoints that really fail:
// a socket path with nothing behind it, a port nothing listens on, a server that
// cuts the connection, and one answering as a daemon does when it cannot serve.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import Docker from "dockerode";
import { DockerCalls, DockerCallError } from "../../src/backends/docker-calls.js";
import { dockerReads, readsRoute } from "../../src/backends/docker-reads.js";
import { loadConfig } from "../../src/config.js";
import { inStep, NarwhalError } from "../../src/errors.js";
import { freePort } from "../e2e/sim-fleet.js";

const timeouts = loadConfig({}, {}).docker.timeouts;
// As the container backend makes them: the observation's reads (list, path stat) over narwhal's own client.
const calls = (opts: Docker.DockerOptions, name: string) =>
  new DockerCalls(new Docker(opts), timeouts, name, dockerReads(readsRoute(opts, null), timeouts.list));
const failureOf = (p: Promise<unknown>) =>
  p.then(
    () => "no error",
    (err: unknown) => (err instanceof DockerCallError ? err.failure : `not a DockerCallError: ${String(err)}`),
  );

describe("Docker call failures: an unavailable daemon is outwaited, its own errors are not", () => {
  let answer: { status: number; message: string } = { status: 500, message: "" };
  let daemon: http.Server;
  let daemonPort = 0;
  let cutter: net.Server;
  let cutterPort = 0;

  beforeAll(async () => {
    // Answers every request with the configured status and Docker's error body.
    daemon = http.createServer((_req, res) => {
      res.writeHead(answer.status, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ message: answer.message }));
    });
    await new Promise<void>((r) => daemon.listen(0, "127.0.0.1", r));
    daemonPort = (daemon.address() as net.AddressInfo).port;
    // Accepts, then cuts the connection: a daemon going down mid-request.
    cutter = net.createServer((s) => s.resetAndDestroy());
    await new Promise<void>((r) => cutter.listen(0, "127.0.0.1", r));
    cutterPort = (cutter.address() as net.AddressInfo).port;
  });
  afterAll(() => {
    daemon.close();
    cutter.close();
  });

  it("outwaits a socket path with no daemon behind it (ENOENT)", async () => {
    const c = calls(
      { socketPath: path.join(os.tmpdir(), `narwhal-no-daemon-${process.pid}.sock`) },
      "a missing socket",
    );
    expect(await failureOf(c.ping())).toBe("outwait");
    expect(await failureOf(c.list(["io.narwhal.purpose=engine"]))).toBe("outwait");
  });

  it("reaches the engine's record as a failure of the step it happened in, keeping its class and naming the fix", async () => {
    const c = calls(
      { socketPath: path.join(os.tmpdir(), `narwhal-no-daemon-${process.pid}.sock`) },
      "a missing socket",
    );
    const err = await c.inspectImage("sim:latest").catch((e: unknown) => inStep(e, "engine-1", "inspect"));
    expect(err).toBeInstanceOf(NarwhalError);
    expect((err as NarwhalError).toJSON()).toMatchObject({
      engine: "engine-1",
      step: "inspect",
      failure: "outwait",
      input: "docker image inspect sim:latest",
    });
    expect((err as NarwhalError).describe()).toMatch(
      /^engine-1 inspect: docker image inspect sim:latest failed on a missing socket: .*ENOENT.* Fix: Start the Docker daemon on the engine host/,
    );
  });

  it("outwaits a refused connection (ECONNREFUSED) and a cut one (ECONNRESET), through dockerode or the reads", async () => {
    const refusing = calls({ host: "127.0.0.1", port: await freePort(), protocol: "http" }, "refusing");
    const cutting = calls({ host: "127.0.0.1", port: cutterPort, protocol: "http" }, "cutting");
    for (const c of [refusing, cutting]) {
      expect(await failureOf(c.inspectImage("sim:latest"))).toBe("outwait");
      expect(await failureOf(c.list([]))).toBe("outwait");
      expect(await failureOf(c.statPath("0123456789ab", "/run/secrets/k"))).toBe("outwait");
    }
  });

  it("a read's 404 is no such path, its 5xx is retried with the daemon's message, its 4xx terminal", async () => {
    const c = calls({ host: "127.0.0.1", port: daemonPort, protocol: "http" }, "a daemon stand-in");
    answer = { status: 404, message: "Could not find the file /run/secrets/k in container 0123456789ab" };
    expect(await c.statPath("0123456789ab", "/run/secrets/k")).toBeNull();
    expect(await c.inspectContainer("0123456789ab")).toBeNull();
    expect(await c.inspectImage("sha256:0123")).toBeNull();
    answer = { status: 200, message: "the daemon's JSON, as it is" };
    expect(await c.inspectContainer("0123456789ab")).toEqual({ message: "the daemon's JSON, as it is" });
    expect(await c.inspectImage("registry.example/sim@sha256:0123")).toEqual({
      message: "the daemon's JSON, as it is",
    });
    answer = { status: 500, message: "injected fault" };
    const err = await c.list(["a=b"]).catch((e: unknown) => e as DockerCallError);
    expect(err).toBeInstanceOf(DockerCallError);
    expect(err).toMatchObject({ failure: "retry", statusCode: 500 });
    expect((err as Error).message).toBe(
      "docker container list failed on a daemon stand-in: (HTTP code 500) injected fault",
    );
    answer = { status: 400, message: "invalid filter" };
    expect(await failureOf(c.list(["a=b"]))).toBe("terminal");
  });

  it("outwaits 503 and a 500 that says the daemon is restarting or shutting down", async () => {
    const c = calls({ host: "127.0.0.1", port: daemonPort, protocol: "http" }, "a daemon stand-in");
    answer = { status: 503, message: "service unavailable" };
    expect(await failureOf(c.list([]))).toBe("outwait");
    answer = { status: 500, message: "Cannot start container: daemon is shutting down" };
    expect(await failureOf(c.start("0123456789ab"))).toBe("outwait");
    answer = { status: 500, message: "container is restarting, wait until the container is running" };
    expect(await failureOf(c.start("0123456789ab"))).toBe("outwait");
  });

  it("retries any other 5xx and treats a 4xx as terminal", async () => {
    const c = calls({ host: "127.0.0.1", port: daemonPort, protocol: "http" }, "a daemon stand-in");
    answer = { status: 500, message: "injected fault" };
    expect(await failureOf(c.start("0123456789ab"))).toBe("retry");
    answer = { status: 400, message: "invalid reference format" };
    expect(await failureOf(c.create({ Image: "x" }))).toBe("terminal");
  });
});
