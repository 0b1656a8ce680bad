// Watch mode with the container backend: the periodic resync lists containers
// by label — a removed engine container is recreated, a labelled orphan that no
// desired engine owns is removed, an unlabelled container is left alone.
import { afterAll, describe, expect, inject, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import { simFleet, type SimFleet } from "../e2e/sim-fleet.js";
import { runCli, startCli, status, waitFor } from "../e2e/cli.js";
import { dockerClient } from "../docker/sim-image.mjs";

describe("reconcile (watch mode) with the container backend", () => {
  const docker = dockerClient(inject("dockerHost"));
  const env = { DOCKER_HOST: inject("dockerHost") };
  let fleet: SimFleet;
  let controller: ChildProcess;
  const stranger = docker.createContainer({
    Image: inject("simImage"),
    Entrypoint: ["python3", "-c", "import time; time.sleep(600)"],
    HostConfig: { NetworkMode: "none" },
  });

  afterAll(async () => {
    if (controller && controller.exitCode === null) {
      controller.kill("SIGTERM");
      await new Promise((r) => controller.once("exit", r));
    }
    await runCli(["down", "--state", fleet.stateDir], env);
    for (const c of await docker.listContainers({
      all: true,
      filters: { label: [`io.narwhal.state=${fleet.stateDir}`] },
    }))
      await docker.getContainer(c.Id).remove({ force: true });
    await (await stranger).remove({ force: true });
  });

  it("recreates a removed engine container and removes a labelled orphan on resync, never a stranger", async () => {
    fleet = await simFleet({ container: { image: inject("simImage") } });
    controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir], env);
    const captured = async () => {
      const e = (await status(fleet.stateDir)).engines;
      return e.length === 2 && e.every((x) => x.phase === "captured")
        ? Object.fromEntries(e.map((x) => [x.engine, x]))
        : undefined;
    };
    const before = await waitFor("both captured", captured, 90_000);
    const s = await stranger;
    await s.start();
    const orphan = await docker.createContainer({
      Image: inject("simImage"),
      Entrypoint: ["python3", "-c", "import time; time.sleep(600)"],
      Labels: {
        "io.narwhal.engine": "engine-7",
        "io.narwhal.launch-token": "e".repeat(32),
        "io.narwhal.state": fleet.stateDir,
        "io.narwhal.purpose": "engine",
      },
      HostConfig: { NetworkMode: "none" },
    });
    await orphan.start();
    await docker.getContainer(before["engine-2"]!.container_id!).remove({ force: true });

    const after = await waitFor(
      "engine-2 recreated",
      async () => {
        const e = await captured();
        return e && e["engine-2"]!.container_id !== before["engine-2"]!.container_id ? e : undefined;
      },
      90_000,
    );
    expect(after["engine-1"]!.container_id).toBe(before["engine-1"]!.container_id);
    expect((await docker.getContainer(after["engine-2"]!.container_id!).inspect()).State.Running).toBe(true);
    await waitFor(
      "the orphan removed",
      async () =>
        orphan.inspect().then(
          () => false,
          (err) => err.statusCode === 404,
        ),
      30_000,
    );
    expect((await s.inspect()).State.Running).toBe(true);
  });
});
