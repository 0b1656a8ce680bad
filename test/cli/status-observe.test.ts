// The no-controller check of `narwhal status` against real processes and a
// Docker endpoint that answers the container list (a fixture speaking the
// Engine API over HTTP): alive, gone and unknown, one list per endpoint, and
// an endpoint that never answers costs a bounded wait, not a hung command.
import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { probeEngines, STATUS_DOCKER_DEADLINE_MS } from "../../src/cli/status-observe.js";
import { readBootId, readProcStat } from "../../src/backends/proc.js";
import type { EngineHandle } from "../../src/phases/types.js";

const STATE = path.join(os.tmpdir(), "narwhal-status-observe-state");
const config = loadConfig({ state: STATE, desired: "/nonexistent" }, {});
const cleanup: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanup.splice(0)) c();
});

async function sleeper(): Promise<{ child: ChildProcess; handle: Extract<EngineHandle, { kind: "native" }> }> {
  const child = spawn("sleep", ["60"], { stdio: "ignore" });
  cleanup.push(() => child.kill("SIGKILL"));
  await new Promise((r) => child.once("spawn", r));
  const stat = await readProcStat(child.pid!);
  return {
    child,
    handle: {
      kind: "native",
      pid: child.pid!,
      pgid: child.pid!,
      boot_id: await readBootId(),
      start_ticks: stat!.startTicks,
      launch_token: "t",
    },
  };
}

/** A Docker endpoint whose container list is `containers`; every request it gets is kept. */
async function dockerEndpoint(
  containers: Array<{ Id: string; State: string; Labels: Record<string, string> }>,
): Promise<{ host: string; requests: string[] }> {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    if (req.method === "GET" && req.url?.startsWith("/containers/json")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(containers.map((c) => ({ ...c, Created: 1, Names: [`/${c.Id}`] }))));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanup.push(() => server.close());
  return { host: `tcp://127.0.0.1:${(server.address() as net.AddressInfo).port}`, requests };
}

const labels = (token: string) => ({
  "io.narwhal.state": STATE,
  "io.narwhal.purpose": "engine",
  "io.narwhal.launch-token": token,
});
const container = (id: string, token: string, docker_host?: string): EngineHandle => ({
  kind: "container",
  container_id: id,
  launch_token: token,
  ...(docker_host ? { docker_host } : {}),
});

describe("status: the no-controller check", () => {
  it("finds a native engine alive by pid and start ticks, and gone once it died or its pid is another process", async () => {
    const a = await sleeper();
    const b = await sleeper();
    b.child.kill("SIGKILL");
    await new Promise((r) => b.child.once("exit", r));
    const live = await probeEngines(config, [
      { engine: "alive", handle: a.handle },
      { engine: "dead", handle: b.handle },
      { engine: "reused", handle: { ...a.handle, start_ticks: a.handle.start_ticks + 1 } },
      { engine: "reboot", handle: { ...a.handle, boot_id: "an-earlier-boot" } },
    ]);
    expect(live).toEqual({
      alive: { liveness: "alive", problem: null },
      dead: { liveness: "gone", problem: `pid ${b.handle.pid} not running` },
      reused: { liveness: "gone", problem: `pid ${a.handle.pid} not running` },
      reboot: { liveness: "gone", problem: `pid ${a.handle.pid} not running` },
    });
  });

  it("says unknown, naming the node, for a native engine on a node it cannot learn (no desired state)", async () => {
    const a = await sleeper();
    const live = await probeEngines(config, [
      { engine: "here", handle: { ...a.handle, node: "local" } },
      { engine: "far", handle: { ...a.handle, node: "gpu-far", boot_id: "another-machine" } },
    ]);
    // The same boot id as this machine's: the engine ran here, whatever its node is called.
    expect(live.here).toEqual({ liveness: "alive", problem: null });
    expect(live.far).toEqual({ liveness: "unknown", problem: expect.stringContaining("node gpu-far") });
  });

  it("answers every container on an endpoint from one labelled list: running, exited, missing, another token", async () => {
    const d = await dockerEndpoint([
      { Id: "c-running", State: "running", Labels: labels("t1") },
      { Id: "c-exited", State: "exited", Labels: labels("t2") },
      { Id: "c-other", State: "running", Labels: labels("someone-else") },
      { Id: "c-paused", State: "paused", Labels: labels("t5") },
    ]);
    const live = await probeEngines(config, [
      { engine: "e1", handle: container("c-running", "t1", d.host) },
      { engine: "e2", handle: container("c-exited", "t2", d.host) },
      { engine: "e3", handle: container("c-missing", "t3", d.host) },
      { engine: "e4", handle: container("c-other", "t4", d.host) },
      { engine: "e5", handle: container("c-paused", "t5", d.host) },
    ]);
    expect(live).toEqual({
      e1: { liveness: "alive", problem: null },
      e2: { liveness: "gone", problem: "container c-exited is exited" },
      e3: { liveness: "gone", problem: expect.stringMatching(/^container c-missing no longer exists on /) },
      e4: { liveness: "gone", problem: "container c-other carries another launch token" },
      e5: { liveness: "unknown", problem: "container c-paused is paused" },
    });
    expect(d.requests).toHaveLength(1);
    expect(d.requests[0]).toMatch(/^GET \/containers\/json\?/);
    expect(decodeURIComponent(d.requests[0]!)).toContain(`io.narwhal.state=${STATE}`);
  });

  it("says unknown, with the endpoint and why, when the endpoint cannot be reached or does not answer in time", async () => {
    // Accepts connections, never answers: what a wedged daemon or a dead tunnel looks like.
    const silent = net.createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    cleanup.push(() => silent.close());
    const wedged = `tcp://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    const started = Date.now();
    const live = await probeEngines(config, [
      { engine: "e1", handle: container("c1", "t1", wedged) },
      { engine: "e2", handle: container("c2", "t2", "unix:///nonexistent/docker.sock") },
    ]);
    expect(Date.now() - started).toBeLessThan(STATUS_DOCKER_DEADLINE_MS + 2_000);
    expect(live.e1).toEqual({
      liveness: "unknown",
      problem: `docker container list on ${wedged}: no answer within ${STATUS_DOCKER_DEADLINE_MS} ms`,
    });
    expect(live.e2!.liveness).toBe("unknown");
    expect(live.e2!.problem).toMatch(/^docker container list on unix:\/\/\/nonexistent\/docker\.sock: .*ENOENT/);
  });
});
