// A lost engine's reason quotes its log's last lines, and every observation of a lost engine asks
// again: a dead container's log is copied whole once (evidence: the daemon's copy goes with the
// container), and after that only its tail is read from the daemon, never the whole log again.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ContainerBackend } from "../../src/backends/container.js";
import { ENGINE_LOG } from "../../src/backends/engine-log.js";
import { loadConfig } from "../../src/config.js";
import { NodeHosts } from "../../src/hosts/node-hosts.js";
import type { EngineHandle, PreparedRun } from "../../src/phases/types.js";
import { dockerClient } from "../docker/sim-image.mjs";

const docker = dockerClient(inject("dockerHost"));
const LINES = 20_000;
const line = (i: number) => `INFO step ${i} ${"x".repeat(60)}`;

describe("a dead container's log, read for a lost engine's reason", () => {
  let dir: string;
  let id: string;
  let hosts: NodeHosts;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-lost-tail-"));
    // ~1.5 MiB of log, then why it died; the container exits.
    const script = `for i in range(${LINES}): print("INFO step %d ${"x".repeat(60)}" % i)\nprint("ERROR CUDA out of memory")`;
    const c = await docker.createContainer({
      Image: inject("simImage"),
      Entrypoint: ["/usr/bin/python3", "-c", script],
      Labels: { "io.narwhal.test": dir },
      HostConfig: { NetworkMode: "none" },
    });
    id = c.id;
    await c.start();
    await c.wait();
  });
  afterAll(async () => {
    await docker
      .getContainer(id)
      .remove({ force: true })
      .catch(() => undefined);
    await hosts?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("copies the whole log into the run directory the first time, then reads only the tail", async () => {
    const config = loadConfig(
      { state: dir },
      { PATH: process.env.PATH, HOME: process.env.HOME, DOCKER_HOST: inject("dockerHost") },
    );
    hosts = new NodeHosts({ stateDir: dir, clientEnv: config.hostEnv });
    const backend = new ContainerBackend({
      stateDir: dir,
      docker: config.docker,
      stopGraceMs: 1000,
      logCapBytes: config.engineLogCapBytes,
      hosts,
    });
    const run: PreparedRun = { engine: "engine-1", dir, input_hash: "i", plan_sha256: "p", launch_token: "t" };
    const handle: EngineHandle = { kind: "container", container_id: id, launch_token: "t" };

    const first = await backend.startupLog(run, handle, { tailBytes: 4096 });
    expect(first.problem).toBeUndefined();
    expect(first.where).toBe(path.join(dir, ENGINE_LOG));
    const copy = await fs.readFile(first.where, "utf8");
    expect(copy.startsWith(`${line(0)}\n`)).toBe(true);
    expect(copy.endsWith(`${line(LINES - 1)}\nERROR CUDA out of memory\n`)).toBe(true);

    const again = await backend.startupLog(run, handle, { tailBytes: 4096 });
    expect(again.problem).toBeUndefined();
    expect(again.where).toMatch(new RegExp(`^docker logs ${id.slice(0, 12)} on `));
    expect(Buffer.byteLength(again.text)).toBeLessThanOrEqual(4096);
    expect(again.text.startsWith("INFO step ")).toBe(true);
    expect(again.text.endsWith(`${line(LINES - 1)}\nERROR CUDA out of memory\n`)).toBe(true);
    // The evidence stays the first, whole copy.
    expect(await fs.readFile(first.where, "utf8")).toBe(copy);
  });
});
