// `narwhal status` with no controller running, on a real Docker Engine behind
// the recording proxy: container engines are checked by one labelled list per
// endpoint (no inspect per engine, no write), and a killed container shows gone.
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { simFleet, type SimFleet } from "../e2e/sim-fleet.js";
import { runCli } from "../e2e/cli.js";
import { startDockerProxy, type DockerProxy } from "../docker/docker-proxy.js";
import { dockerClient } from "../docker/sim-image.mjs";
import type { StatusView } from "../../src/cli/status-view.js";

describe("status of a container fleet with no controller running", () => {
  const docker = dockerClient(inject("dockerHost"));
  let proxy: DockerProxy;
  let fleet: SimFleet;
  const env = () => ({ DOCKER_HOST: proxy.host });
  const status = async (...extra: string[]) => {
    const r = await runCli(
      ["status", ...extra, "--desired", fleet.dir, "--state", fleet.stateDir, "--format", "json"],
      env(),
    );
    expect(r.code, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as StatusView;
  };

  beforeAll(async () => {
    proxy = await startDockerProxy(inject("dockerHost"));
    fleet = await simFleet({ container: { image: inject("simImage") } });
  });
  afterAll(async () => {
    await runCli(["down", "--state", fleet.stateDir], env());
    for (const c of await docker.listContainers({
      all: true,
      filters: { label: [`io.narwhal.state=${fleet.stateDir}`] },
    }))
      await docker.getContainer(c.Id).remove({ force: true });
    await proxy.close();
  });

  it("checks both containers with one list call, and shows a killed one gone", async () => {
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], env());
    expect(r.code, r.stderr).toBe(0);

    proxy.calls.length = 0;
    const view = await status();
    expect(view.controller).toMatchObject({ running: false });
    expect(view.checked?.engines).toBe(2);
    expect(view.engines.map((e) => [e.engine, e.live?.liveness])).toEqual([
      ["engine-1", "alive"],
      ["engine-2", "alive"],
    ]);
    expect(proxy.calls.map((c) => `${c.method} ${c.path.split("?")[0]}`)).toEqual(["GET /containers/json"]);

    const victim = view.engines.find((e) => e.engine === "engine-2")!;
    await docker.getContainer(victim.container_id!).kill();
    proxy.calls.length = 0;
    const after = await status();
    expect(after.engines.find((e) => e.engine === "engine-2")).toMatchObject({
      phase: "captured",
      live: { liveness: "gone", problem: `container ${victim.container_id!.slice(0, 12)} is exited` },
    });
    expect(after.engines.find((e) => e.engine === "engine-1")?.live?.liveness).toBe("alive");
    expect(proxy.writes()).toEqual([]);

    const one = await status("engine-1");
    expect(one.engines.map((e) => e.engine)).toEqual(["engine-1"]);
    expect(one.checked?.engines).toBe(1);
  });
});
