// A misbehaving Docker daemon, simulated by the fault proxy in front of the
// real one: 500s, dropped connections and a daemon that hangs. The controller
// never waits past a call's deadline, retries with capped backoff, and
// converges once the fault clears — with exactly one container per engine.
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import { simFleet, type SimFleetOptions } from "../e2e/sim-fleet.js";
import { runCli, status } from "../e2e/cli.js";
import { startDockerProxy, type DockerProxy } from "../docker/docker-proxy.js";
import { dockerClient } from "../docker/sim-image.mjs";

describe("Docker daemon faults", () => {
  const docker = dockerClient(inject("dockerHost"));
  let proxy: DockerProxy;
  const stateDirs: string[] = [];
  const opts = (): SimFleetOptions => ({ container: { image: inject("simImage") } });
  const retryEnv = { NARWHAL_RETRY_MAX_ATTEMPTS: "8", NARWHAL_RETRY_BASE_MS: "200", NARWHAL_RETRY_CAP_MS: "1000" };

  async function converge(env: Record<string, string>) {
    const fleet = await simFleet(opts());
    stateDirs.push(fleet.stateDir);
    const started = Date.now();
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], { DOCKER_HOST: proxy.host, ...retryEnv, ...env });
    const engines = (await status(fleet.stateDir)).engines;
    const containers = await docker.listContainers({ all: true, filters: { label: [`io.narwhal.state=${fleet.stateDir}`] } });
    return { r, engines, containers, seconds: (Date.now() - started) / 1000 };
  }

  beforeAll(async () => {
    proxy = await startDockerProxy(inject("dockerHost"));
  });
  // Each test's fleet goes away before the next: engine containers are named narwhal-<engine> per daemon.
  afterEach(async () => {
    proxy.rules.length = 0;
    for (const dir of stateDirs.splice(0)) {
      await runCli(["down", "--state", dir], { DOCKER_HOST: inject("dockerHost") });
      for (const c of await docker.listContainers({ all: true, filters: { label: [`io.narwhal.state=${dir}`] } })) await docker.getContainer(c.Id).remove({ force: true });
    }
  });
  afterAll(() => proxy.close());

  it("retries through 500s on create and start", async () => {
    proxy.rules.push({ method: "POST", path: /^\/containers\/create/, action: "error500", times: 2 }, { method: "POST", path: /^\/containers\/[0-9a-f]+\/start/, action: "error500", times: 1 });
    const { r, engines, containers } = await converge({});
    proxy.rules.length = 0;
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    const notes = engines.flatMap((e) => e.history.map((h) => h.note ?? ""));
    expect(notes.some((n) => /injected fault/.test(n))).toBe(true);
    expect(containers.filter((c) => c.Labels["io.narwhal.purpose"] === "engine").length).toBe(2);
  });

  it("retries through dropped connections", async () => {
    proxy.rules.push({ method: "GET", path: /^\/images\//, action: "drop", times: 2 });
    const { r, containers } = await converge({});
    proxy.rules.length = 0;
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    expect(containers.filter((c) => c.Labels["io.narwhal.purpose"] === "engine").length).toBe(2);
  });

  it("never blocks past a deadline while the daemon hangs, and converges once it answers again", async () => {
    // Every call hangs for the first 5 s; each has a 1 s deadline.
    proxy.rules.push({ path: /.*/, action: "stall", method: "GET" }, { path: /.*/, action: "stall", method: "POST" });
    const clear = setTimeout(() => (proxy.rules.length = 0), 5000);
    const timeouts = Object.fromEntries(["PING", "INSPECT", "LIST", "CREATE", "START", "LOGS"].map((k) => [`NARWHAL_DOCKER_${k}_MS`, "1000"]));
    const { r, engines, containers, seconds } = await converge(timeouts);
    clearTimeout(clear);
    proxy.rules.length = 0;
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    expect(r.stderr).toMatch(/exceeded its deadline of 1000 ms/);
    expect(engines.every((e) => e.phase === "captured")).toBe(true);
    expect(containers.filter((c) => c.Labels["io.narwhal.purpose"] === "engine").length).toBe(2);
    expect(seconds).toBeLessThan(60);
  });
});
