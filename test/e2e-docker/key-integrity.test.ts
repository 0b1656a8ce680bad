// A container engine's API key under real faults on a real Docker Engine: its key file
// chmodded to 0644 (noticed by watch mode's resync), and its key file deleted by
// `docker exec` followed by a restart (the fail-closed wrapper refuses to serve; the
// next reconcile replaces it), a key file changed while no controller runs, and one rewritten in place (same length and mode: its digest). Each time narwhal replaces the engine, names the
// cause, and the new engine answers 401 without its key and 200 with it.
import { afterAll, describe, expect, inject, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import Docker from "dockerode";
import { simFleet, type SimFleet, type SimFleetOptions } from "../e2e/sim-fleet.js";
import { runCli, startCli, status, waitFor } from "../e2e/cli.js";
import { assertKeyEnforced, reconcileOnce } from "../e2e/campaign.js";
import { dockerClient } from "../docker/sim-image.mjs";
import { DockerCalls } from "../../src/backends/docker-calls.js";
import { loadConfig } from "../../src/config.js";

const KEY_FILE = "/run/secrets/narwhal-api-key";

/** Run a command in a container and wait for it to finish (docker exec). */
async function exec(container: Docker.Container, cmd: string[]): Promise<number | null> {
  const e = await container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await e.start({});
  await new Promise((resolve) => {
    stream.on("end", resolve);
    stream.resume();
  });
  return (await e.inspect()).ExitCode;
}

describe("API key file integrity (container backend)", () => {
  const docker = dockerClient(inject("dockerHost"));
  const env = { DOCKER_HOST: inject("dockerHost") };
  const opts: SimFleetOptions = { container: { image: inject("simImage") } };
  let fleet: SimFleet;
  let controller: ChildProcess | undefined;
  const byEngine = async () => Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, e]));
  const stopController = async () => {
    if (controller && controller.exitCode === null) {
      controller.kill("SIGTERM");
      await new Promise((r) => controller!.once("exit", r));
    }
  };

  afterAll(async () => {
    await stopController();
    await runCli(["down", "--state", fleet.stateDir], env);
    for (const c of await docker.listContainers({
      all: true,
      filters: { label: [`io.narwhal.state=${fleet.stateDir}`] },
    }))
      await docker.getContainer(c.Id).remove({ force: true });
  });

  it("a key file chmodded to 0644 is noticed on resync: the engine is replaced, the cause named", async () => {
    fleet = await simFleet(opts);
    controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir], env);
    let log = "";
    controller.stderr!.on("data", (d) => (log += d));
    controller.stdout!.on("data", (d) => (log += d));
    const captured = async () => {
      const e = await byEngine();
      return Object.keys(e).length === 2 && Object.values(e).every((x) => x.phase === "captured") ? e : undefined;
    };
    const before = await waitFor("both captured", captured, 120_000);
    const old = docker.getContainer(before["engine-1"]!.container_id!);
    expect(await exec(old, ["python3", "-c", `import os; os.chmod(${JSON.stringify(KEY_FILE)}, 0o644)`])).toBe(0);

    const after = await waitFor(
      "engine-1 replaced",
      async () => {
        const e = await captured();
        return e && e["engine-1"]!.container_id !== before["engine-1"]!.container_id ? e : undefined;
      },
      120_000,
    );
    expect(log).toContain(`API key file ${KEY_FILE} has mode 0644, not 0400`);
    expect(after["engine-1"]!.history.map((h) => h.note ?? "").join("\n")).toContain(
      `does not hold its API key as recorded: API key file ${KEY_FILE} has mode 0644, not 0400`,
    );
    await expect(old.inspect()).rejects.toMatchObject({ statusCode: 404 });
    expect(after["engine-2"]!.container_id, "the other engine is never touched").toBe(before["engine-2"]!.container_id);
    await assertKeyEnforced(after["engine-1"]!.run_dir!, "engine-1");
    await stopController();
  });

  it("a key file deleted by docker exec, then a restart: the engine refuses to serve, and the rerun replaces it", async () => {
    const before = await byEngine();
    const id = before["engine-2"]!.container_id!;
    const c = docker.getContainer(id);
    expect(await exec(c, ["python3", "-c", `import os; os.remove(${JSON.stringify(KEY_FILE)})`])).toBe(0);
    await c.restart({ t: 3 });
    // Fail closed: the wrapper exits (78) with a line naming the file, and nothing listens on the engine's port.
    const exited = await waitFor(
      "the keyless container exits",
      async () => {
        const info = await c.inspect();
        return info.State.Status === "exited" ? info : undefined;
      },
      60_000,
    );
    expect(exited.State.ExitCode).toBe(78);
    const logs = (await c.logs({ stdout: true, stderr: true })).toString();
    expect(logs).toContain(`narwhal-engine: refusing to serve: API key file ${KEY_FILE} is missing or unreadable`);
    await expect(fetch(`http://127.0.0.1:${fleet.ports[1]![0]}/v1/models`)).rejects.toThrow();

    const r = await reconcileOnce(fleet, env);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    expect(r.stderr + r.stdout).toContain("refusing to serve: API key file");
    const after = await byEngine();
    expect(after["engine-2"]!.phase).toBe("captured");
    expect(after["engine-2"]!.container_id).not.toBe(id);
    expect(after["engine-1"]!.container_id, "the other engine is never touched").toBe(before["engine-1"]!.container_id);
    await assertKeyEnforced(after["engine-2"]!.run_dir!, "engine-2");
  });

  it("a key file changed while no controller runs is noticed by the next reconcile --once, before it reports success", async () => {
    const before = await byEngine();
    const old = docker.getContainer(before["engine-1"]!.container_id!);
    expect(await exec(old, ["python3", "-c", `import os; os.chmod(${JSON.stringify(KEY_FILE)}, 0o644)`])).toBe(0);
    // engine-1 was replaced moments ago (first test): a budget of 2 would call this a crash loop.
    const r = await reconcileOnce(fleet, { ...env, NARWHAL_RETRY_MAX_ATTEMPTS: "5" });
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    expect(r.stderr + r.stdout).toContain(
      `found at controller start without its API key as recorded: API key file ${KEY_FILE} has mode 0644, not 0400`,
    );
    const after = await byEngine();
    expect(after["engine-1"]!.phase).toBe("captured");
    expect(after["engine-1"]!.container_id).not.toBe(before["engine-1"]!.container_id);
    expect(after["engine-2"]!.container_id, "the other engine is never touched").toBe(before["engine-2"]!.container_id);
    await assertKeyEnforced(after["engine-1"]!.run_dir!, "engine-1");
  });

  it("a key file rewritten in place (same length, same mode) is caught by its digest, past the stat the run recorded", async () => {
    const before = await byEngine();
    const e2 = before["engine-2"]!;
    // The run recorded the daemon's stat of the file as last proven; an observation that finds the same stat reads no archive.
    const record = JSON.parse(await fs.readFile(path.join(e2.run_dir!, "container-key-stat.json"), "utf8"));
    expect(record).toMatchObject({ container_id: e2.container_id, stat: { name: "narwhal-api-key", mode: 0o400 } });
    const c = docker.getContainer(e2.container_id!);
    // ...and the running container's file still has it: what every resync compares, without a download.
    const calls = new DockerCalls(docker, loadConfig({}, {}).docker.timeouts, "the test daemon");
    expect(await calls.statPath(e2.container_id!, KEY_FILE)).toEqual(record.stat);
    const rewrite = `p = ${JSON.stringify(KEY_FILE)}; n = len(open(p).read()); open(p, "w").write("x" * n)`;
    expect(await exec(c, ["python3", "-c", rewrite])).toBe(0);
    const r = await reconcileOnce(fleet, { ...env, NARWHAL_RETRY_MAX_ATTEMPTS: "5" });
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    expect(r.stderr + r.stdout).toMatch(
      /without its API key as recorded: API key file \S+ has digest sha256:\w+…, not the run's/,
    );
    const after = await byEngine();
    expect(after["engine-2"]!.phase).toBe("captured");
    expect(after["engine-2"]!.container_id).not.toBe(e2.container_id);
    await assertKeyEnforced(after["engine-2"]!.run_dir!, "engine-2");
  });
});
