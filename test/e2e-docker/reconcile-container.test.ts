// The container backend end to end on a real Docker Engine, through a
// recording/fault proxy: the CLI is a separate process whose DOCKER_HOST is
// the proxy, so the test sees every API call it makes.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleet, type SimFleetOptions } from "../e2e/sim-fleet.js";
import { randomUUID } from "node:crypto";
import { runCli, startCli, status, waitFor } from "../e2e/cli.js";
import { startDockerProxy, type DockerProxy } from "../docker/docker-proxy.js";
import { dockerClient } from "../docker/sim-image.mjs";
import { readState } from "../../src/state/store.js";

const KEY = "container-canary-key-31337";
// dockerode sends the create options as a query string too; the name is one of them.
const CREATE_ENGINE_1 = /^\/containers\/create\?(.*&)?name=narwhal-engine-1(&|$)/;

describe("reconcile --once with the container backend", () => {
  const docker = dockerClient(inject("dockerHost"));
  let proxy: DockerProxy;
  let fleet: SimFleet;
  const env = () => ({ DOCKER_HOST: proxy.host });
  // One-engine runtime edits split the pair into two groups (seed 000): proofs would rightly find no pair. This
  // file is about containers and replacements; proofs across containers are two-host-container-rig's.
  const opts = (o: Partial<SimFleetOptions> = {}): SimFleetOptions => ({
    kvTransfer: { prove: false },
    container: { image: inject("simImage") },
    apiKey: KEY,
    ...o,
  });
  const once = (extra: Record<string, string> = {}) =>
    runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], { ...env(), ...extra });
  const logs = (...args: string[]) =>
    runCli(["logs", ...args, "--desired", fleet.dir, "--state", fleet.stateDir], env());
  /** The simulator writes an access-log line (stdout; its startup lines go to stderr) for each request. */
  const request = (engine: number, at: string) =>
    fetch(`http://127.0.0.1:${fleet.ports[engine]![0]}${at}`).then((r) => r.text());
  /** `narwhal logs ENGINE -f` running: what it printed so far on each stream, and its exit code when it ends. */
  const follow = (engine: string) => {
    const child = startCli(["logs", engine, "-f", "--desired", fleet.dir, "--state", fleet.stateDir], env());
    const seen = { stdout: "", stderr: "" };
    child.stdout!.on("data", (d) => (seen.stdout += d));
    child.stderr!.on("data", (d) => (seen.stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    return { child, seen, exited };
  };
  /** A request engine-2 answered in its first container, looked for in its log after the replacement. */
  const beforeReplace = `/engine-2-before-${randomUUID()}`;
  const byEngine = async () => Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, e]));
  const ours = async (purpose = "engine") =>
    docker.listContainers({
      all: true,
      filters: { label: [`io.narwhal.state=${fleet.stateDir}`, `io.narwhal.purpose=${purpose}`] },
    });

  beforeAll(async () => {
    proxy = await startDockerProxy(inject("dockerHost"));
    fleet = await simFleet(opts());
  });
  afterAll(async () => {
    await runCli(["down", "--state", fleet.stateDir], env());
    for (const c of await ours()) await docker.getContainer(c.Id).remove({ force: true });
    await proxy.close();
  });

  it("brings both engines to captured in labelled containers, exit 0", async () => {
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    const engines = await byEngine();
    for (const e of Object.values(engines)) {
      expect(e.phase).toBe("captured");
      expect(e.container_id).toMatch(/^[0-9a-f]{64}$/);
      const info = await docker.getContainer(e.container_id!).inspect();
      expect(info.State.Running).toBe(true);
      expect(info.Name).toBe(`/narwhal-${e.engine}`);
      expect(info.HostConfig.NetworkMode).toBe("host");
      expect(info.HostConfig.Binds).toContain(`${path.join(process.cwd(), "test/sim/models/tiny-llama")}:/model:ro`);
      expect(info.Config.Labels).toMatchObject({
        "io.narwhal.engine": e.engine,
        "io.narwhal.input-hash": e.desired_hash,
        "io.narwhal.run": e.run_dir,
      });
      expect(info.Config.Labels["io.narwhal.launch-token"]).toMatch(/^[0-9a-f]{32}$/);
      // The API key is nowhere in docker inspect (not in Config.Env, not on the command line).
      expect(JSON.stringify(info)).not.toContain(KEY);
      const files = await fs.readdir(e.run_dir!);
      for (const f of [
        "launch.json",
        "checked.json",
        "image-check.log",
        "container.id",
        "metrics.txt",
        "cache-layout.json",
      ])
        expect(files).toContain(f);
      const checked = JSON.parse(await fs.readFile(path.join(e.run_dir!, "checked.json"), "utf8"));
      expect(checked.image_id).toBe(inject("simImageId"));
      expect((await fs.readFile(path.join(e.run_dir!, "container.id"), "utf8")).trim()).toBe(e.container_id);
    }
    // The probe used the key: /v1/* answered, so the engine got it from its secret file.
    expect(engines["engine-1"]!.group_signature).toBe(engines["engine-2"]!.group_signature);
    expect(await ours("check")).toEqual([]); // every temporary check container was removed
    expect(await fs.readFile(path.join(fleet.stateDir, "narwhal.json"), "utf8")).not.toContain(KEY);
    expect(await fs.readFile(path.join(fleet.stateDir, "narwhal.log"), "utf8")).not.toContain(KEY);
    expect(r.stdout + r.stderr).not.toContain(KEY);
    for (const e of Object.values(engines))
      expect(await fs.readFile(path.join(e.run_dir!, "launch.json"), "utf8")).not.toContain(KEY);
  });

  it("narwhal logs reads a container engine's log through its Docker endpoint: whole, --tail N, and -f until interrupted", async () => {
    const marker = `/before-${randomUUID()}`;
    await request(0, marker);
    await request(1, beforeReplace);
    // The access line is written after the answer: wait for it in the log, not a fixed time.
    const r = await waitFor("the request's line in engine-1's container log", async () => {
      const got = await logs("engine-1");
      return got.code === 0 && got.stdout.includes(`"GET ${marker} HTTP/1.1"`) && got;
    });
    const { container_id } = (await byEngine())["engine-1"]!;
    expect(r.stderr).toContain(`==> engine-1: run `);
    expect(r.stderr).toContain(`(current run), container ${container_id!.slice(0, 12)} (running) on ${proxy.host}`);
    // stderr (startup) and stdout (access log) in one stream, without Docker's 8-byte frame headers.
    expect(r.stdout).toContain("Application startup complete");
    expect(r.stdout).not.toMatch(/[\x00-\x08]/);
    const tail = await logs("engine-1", "--tail", "1");
    expect(tail.code, tail.stderr).toBe(0);
    expect(tail.stdout.trimEnd().split("\n")).toEqual([expect.stringContaining(`"GET ${marker} HTTP/1.1"`)]);

    const f = follow("engine-1");
    try {
      await waitFor("the follow to print the log so far", async () => f.seen.stdout.includes(marker), 30_000);
      const after = `/after-${randomUUID()}`;
      await request(0, after);
      await waitFor("the follow to print a line written after it began", async () => f.seen.stdout.includes(after));
    } finally {
      f.child.kill("SIGINT");
    }
    // Interrupted: the follow ends quietly with exit 0, having printed the log once, unframed.
    expect(await f.exited, f.seen.stderr).toBe(0);
    const { stdout, stderr } = f.seen;
    expect(stderr).not.toMatch(/error|docker logs/i);
    expect(stdout.split("Application startup complete")).toHaveLength(2);
    expect(stdout).not.toMatch(/[\x00-\x08]/);
    // Seed 000: Ctrl-C stops the log follower and leaves the serving container running.
    expect((await docker.getContainer(container_id!).inspect()).State.Running).toBe(true);
  });

  it("makes no Docker write calls on a second run, and takes liveness from the one labelled list (no inspect per engine)", async () => {
    const before = await byEngine();
    proxy.calls.length = 0;
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    expect(proxy.calls.length).toBeGreaterThan(0);
    expect(proxy.writes()).toEqual([]);
    // Liveness comes from the one labelled list call, not an inspect per engine (issue 14 item 3).
    expect(proxy.calls.filter((c) => c.method === "GET" && c.path.startsWith("/containers/json"))).toHaveLength(1);
    expect(proxy.calls.filter((c) => /^\/containers\/[0-9a-f]{64}\/json/.test(c.path))).toEqual([]);
    const after = await byEngine();
    for (const n of ["engine-1", "engine-2"]) expect(after[n]!.container_id).toBe(before[n]!.container_id);
  });

  it("replaces only the engine whose extra_args changed", async () => {
    const before = await byEngine();
    // A follow of engine-2's log across its replacement ends by itself, saying why, exit 0.
    const f = follow("engine-2");
    await waitFor("the follow to print engine-2's log so far", async () => f.seen.stdout.includes(beforeReplace));
    await fleet.write(opts({ engines: [{}, { extraArgs: ["--max-num-seqs", "64"] }] }));
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    expect(await f.exited, f.seen.stderr).toBe(0);
    expect(f.seen.stderr).toMatch(
      /narwhal: (engine-2 was replaced|container [0-9a-f]{12} stopped).*; stopped following/,
    );
    const after = await byEngine();
    expect(after["engine-1"]!.container_id).toBe(before["engine-1"]!.container_id);
    expect(after["engine-2"]!.container_id).not.toBe(before["engine-2"]!.container_id);
    expect((await ours()).map((c) => c.Id).sort()).toEqual(
      [after["engine-1"]!.container_id, after["engine-2"]!.container_id].sort(),
    );
  });

  it("narwhal logs --previous prints a replaced container engine's old run, copied when its container went", async () => {
    const previous = await logs("engine-2", "--previous");
    expect(previous.code, previous.stderr).toBe(0);
    expect(previous.stderr).toContain("(an older run)");
    expect(previous.stderr).toContain("its container is gone: the log copied when it stopped");
    expect(previous.stdout).toContain(`"GET ${beforeReplace} HTTP/1.1"`);
    const current = await logs("engine-2");
    expect(current.code, current.stderr).toBe(0);
    expect(current.stderr).toContain("(current run), container");
    expect(current.stdout).toContain("Application startup complete");
    expect(current.stdout).not.toContain(beforeReplace);
  });

  it("regroups and replaces both engines when the image changes", async () => {
    const before = await byEngine();
    await fleet.write(
      opts({ container: { image: inject("simImageB") }, engines: [{}, { extraArgs: ["--max-num-seqs", "64"] }] }),
    );
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    const after = await byEngine();
    for (const n of ["engine-1", "engine-2"]) {
      expect(after[n]!.container_id).not.toBe(before[n]!.container_id);
      expect(after[n]!.group_signature).not.toBe(before[n]!.group_signature);
      expect((await docker.getContainer(after[n]!.container_id!).inspect()).Image).toBe(inject("simImageBId"));
    }
    expect((await ours()).length).toBe(2);
  });

  it("repairs a removed container, removes a labelled orphan, and never touches an unlabelled container", async () => {
    const before = await byEngine();
    await docker.getContainer(before["engine-1"]!.container_id!).remove({ force: true });
    const sleeper = (labels: Record<string, string>) =>
      docker.createContainer({
        Image: inject("simImage"),
        Entrypoint: ["python3", "-c", "import time; time.sleep(600)"],
        Labels: labels,
        HostConfig: { NetworkMode: "none" },
      });
    const orphan = await sleeper({
      "io.narwhal.engine": "engine-9",
      "io.narwhal.launch-token": "f".repeat(32),
      "io.narwhal.state": fleet.stateDir,
      "io.narwhal.purpose": "engine",
    });
    const stranger = await sleeper({ purpose: "not narwhal" });
    await orphan.start();
    await stranger.start();
    try {
      const r = await once();
      expect(r.code, r.stderr).toBe(0);
      const after = await byEngine();
      expect(after["engine-1"]!.container_id).not.toBe(before["engine-1"]!.container_id);
      expect(after["engine-2"]!.container_id).toBe(before["engine-2"]!.container_id);
      await expect(orphan.inspect()).rejects.toMatchObject({ statusCode: 404 });
      expect((await stranger.inspect()).State.Running).toBe(true);
    } finally {
      await stranger.remove({ force: true });
    }
  });

  it("after SIGKILL between create and the state write, a rerun adopts the container instead of creating another", async () => {
    await fleet.write(
      opts({
        container: { image: inject("simImageB") },
        engines: [{ extraArgs: ["--max-num-seqs", "8"] }, { extraArgs: ["--max-num-seqs", "64"] }],
      }),
    );
    // The daemon creates the container, but its answer never reaches the controller.
    proxy.rules.push({ method: "POST", path: CREATE_ENGINE_1, action: "stall", times: 1 });
    const child = startCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], env());
    try {
      await waitFor(
        "the container to exist",
        async () => (await ours()).some((c) => c.Labels["io.narwhal.engine"] === "engine-1" && c.State === "created"),
        60_000,
      );
    } finally {
      child.kill("SIGKILL");
      await new Promise((r) => child.once("close", r));
      proxy.rules.length = 0;
    }
    const st = await readState(fleet.stateDir);
    expect(st.engines["engine-1"]!.handle).toBeNull(); // the state never heard of the new container
    const r = await once();
    expect(r.code, r.stderr).toBe(0);
    const containers = await ours();
    expect(containers.map((c) => c.Labels["io.narwhal.engine"]).sort()).toEqual(["engine-1", "engine-2"]);
  });

  it("fails a Docker call past its deadline with a retryable error naming it, and leaves no container behind", async () => {
    await fleet.write(
      opts({
        container: { image: inject("simImageB") },
        engines: [{ extraArgs: ["--max-num-seqs", "4"] }, { extraArgs: ["--max-num-seqs", "64"] }],
      }),
    );
    proxy.rules.push({ method: "POST", path: CREATE_ENGINE_1, action: "stall", times: 1 });
    const r = await once({ NARWHAL_DOCKER_CREATE_MS: "1500", NARWHAL_RETRY_MAX_ATTEMPTS: "3" });
    proxy.rules.length = 0;
    expect(r.code, r.stderr).toBe(0);
    const e1 = (await byEngine())["engine-1"]!;
    const failures = e1.history.filter((h) => h.to === "failed").map((h) => h.note ?? "");
    expect(
      failures.some((n) => /docker container create narwhal-engine-1 exceeded its deadline of 1500 ms/.test(n)),
      failures.join("\n"),
    ).toBe(true);
    expect(r.stderr).toMatch(/retry 1\/3/); // the retry policy of this run, not of the run that created the actor
    const containers = await ours();
    expect(containers.map((c) => c.Labels["io.narwhal.engine"]).sort()).toEqual(["engine-1", "engine-2"]);
    expect(containers.find((c) => c.Labels["io.narwhal.engine"] === "engine-1")!.Id).toBe(e1.container_id);
  });
});
