// A resync whose container listing is taken while an engine's start has created its container but not yet
// started it (listed "created", not running), and answered after that start recorded the engine's handle:
// the listing speaks for the handles known when it was asked for, so the new engine's liveness is asked of
// Docker instead. Before, the observation judged that handle by the listing and found the healthy engine
// "exited": stopped, restarted, and (in two clean-clone runs of watch-container and watch-hung-docker, each
// waiting 90-150 s for a capture that never came) left failed. The Docker proxy holds the two answers so the
// interleaving is the test's, not the machine's timing; the build before fails it every time.
import { afterAll, describe, expect, inject, it } from "vitest";
import { ControllerHarness, type Transition } from "../e2e/controller-harness.js";
import { runCli } from "../e2e/cli.js";
import { startDockerProxy, type DockerProxy } from "../docker/docker-proxy.js";
import { dockerClient } from "../docker/sim-image.mjs";

/** The labelled list call of a full observation: every container of this state directory (not one token's). */
const FLEET_LISTING = /^\/containers\/json\?.*io\.narwhal\.state%3D/;

/** A promise and the function that settles it: a response the proxy holds until the test lets it go. */
function gate(): { until: Promise<void>; release: () => void } {
  let release!: () => void;
  const until = new Promise<void>((r) => (release = r));
  return { until, release };
}

describe("a resync that meets a container engine's start", () => {
  const docker = dockerClient(inject("dockerHost"));
  let proxy: DockerProxy;
  let h: ControllerHarness | undefined;

  afterAll(async () => {
    proxy.rules.length = 0;
    if (h) {
      await h.detach();
      await runCli(["down", "--state", h.fleet.stateDir], { DOCKER_HOST: inject("dockerHost") });
      for (const c of await docker.listContainers({
        all: true,
        filters: { label: [`io.narwhal.state=${h.fleet.stateDir}`] },
      }))
        await docker.getContainer(c.Id).remove({ force: true });
    }
    await proxy.close();
  });

  it("judges only the engines that existed when its listing was taken: the started engine is not found exited", async () => {
    proxy = await startDockerProxy(inject("dockerHost"));
    const create = gate();
    const list = gate();
    const engine2Create = /^\/containers\/create\?(.*&)?name=narwhal-engine-2(&|$)/;
    proxy.rules.push(
      // engine-2's container exists on the daemon ("created"); its start waits for this answer.
      { method: "POST", path: engine2Create, action: "stall", until: create.until, times: 1 },
      // The first fleet listing after that create is taken then, and answered when the test says.
      {
        method: "GET",
        path: FLEET_LISTING,
        action: "stall",
        until: list.until,
        times: 1,
        armedBy: engine2Create,
      },
    );
    h = await ControllerHarness.create({
      fleet: { container: { image: inject("simImage") } },
      env: { DOCKER_HOST: proxy.host, NARWHAL_RESYNC_MS: "600000" },
    });
    const harness = h;
    harness.controller.apply(await harness.desired());
    const seen = (re: RegExp, method: string, after = 0) =>
      proxy.calls.slice(after).findIndex((c) => c.method === method && re.test(c.path));
    await harness.until("engine-2's container created", () => seen(engine2Create, "POST") >= 0);
    const createdAt = seen(engine2Create, "POST");
    harness.controller.resync();
    await harness.until("a resync's listing taken after that create", () => seen(FLEET_LISTING, "GET", createdAt) >= 0);
    const mark = harness.mark();
    create.release();
    const startedEngine2 = (v: { transitions: readonly Transition[] }) =>
      v.transitions.slice(mark).some((t) => t.engine === "engine-2" && t.to === "started");
    await harness.until("engine-2 started (its handle recorded)", startedEngine2);
    list.release();
    const captured = await harness.until("both engines captured", async (v) => {
      const s = await v.state();
      return ["engine-1", "engine-2"].every((e) => s.engines[e]?.phase === "captured") ? s : undefined;
    });
    await harness.settle();
    const engine2 = harness.since(0).filter((t) => t.engine === "engine-2");
    expect(engine2.filter((t) => t.to === "started").length, engine2.map((t) => `${t.from} → ${t.to}`).join("\n")).toBe(
      1,
    );
    expect(harness.stopCount("engine-2")).toBe(0);
    const lost = harness.lines.filter(
      (l) => l.meta.engine === "engine-2" && /exited|no longer running/.test(l.message),
    );
    expect(lost.map((l) => l.message)).toEqual([]);
    expect((await harness.state()).engines["engine-2"]!.handle).toEqual(captured.engines["engine-2"]!.handle);
  });
});
