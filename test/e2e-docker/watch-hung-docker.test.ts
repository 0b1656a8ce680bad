// A Docker endpoint that hangs under a watch-mode controller (issue 9): resyncs
// keep coming every period, but the work they ask for is coalesced — the
// requests held open by the hung daemon stay bounded — and SIGTERM ends the
// controller within the longest Docker deadline plus 5 s, exit 0, engines left
// running. The old loop queued one resync per interval and drained them all on
// SIGTERM, each waiting out its deadlines.
import { afterAll, describe, expect, inject, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import { simFleet, type SimFleet } from "../e2e/sim-fleet.js";
import { runCli, startCli, status, waitFor } from "../e2e/cli.js";
import { sleep } from "../desired-corpus/controller-harness.js";
import { startDockerProxy, type DockerProxy } from "../docker/docker-proxy.js";
import { dockerClient } from "../docker/sim-image.mjs";

const RESYNC_MS = 200;
/** Per-call deadlines: short enough that a hung call gives up within seconds, long enough for a loaded machine's converge. */
const DEADLINES = {
  PING: 2000,
  INSPECT: 2000,
  LIST: 2000,
  LOGS: 2000,
  CREATE: 5000,
  START: 5000,
  STOP: 5000,
  REMOVE: 5000,
  CHECK: 20_000,
};
const LONGEST_DEADLINE_MS = Math.max(...Object.values(DEADLINES));
/** At most this many requests held open at once: one resync at a time (a read and the call it leads to). */
const OPEN_BOUND = 2;

describe("watch mode against a hung Docker endpoint", () => {
  const docker = dockerClient(inject("dockerHost"));
  let proxy: DockerProxy;
  let fleet: SimFleet;
  let controller: ChildProcess | undefined;

  afterAll(async () => {
    proxy.rules.length = 0;
    if (controller && controller.exitCode === null && controller.signalCode === null) {
      controller.kill("SIGKILL");
      await new Promise((r) => controller!.once("exit", r));
    }
    await runCli(["down", "--state", fleet.stateDir], { DOCKER_HOST: inject("dockerHost") });
    for (const c of await docker.listContainers({
      all: true,
      filters: { label: [`io.narwhal.state=${fleet.stateDir}`] },
    }))
      await docker.getContainer(c.Id).remove({ force: true });
    await proxy.close();
  });

  it("keeps the requests it holds open bounded over 10 resync periods, and exits 0 on SIGTERM within the longest deadline plus 5 s, engines left running", async () => {
    proxy = await startDockerProxy(inject("dockerHost"));
    fleet = await simFleet({ container: { image: inject("simImage") } });
    const env = {
      DOCKER_HOST: proxy.host,
      NARWHAL_RESYNC_MS: String(RESYNC_MS),
      ...Object.fromEntries(Object.entries(DEADLINES).map(([k, v]) => [`NARWHAL_DOCKER_${k}_MS`, String(v)])),
    };
    const proc = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir], env);
    controller = proc;
    let log = "";
    proc.stdout!.on("data", (d) => (log += d));
    proc.stderr!.on("data", (d) => (log += d));
    const exited = new Promise<{ code: number | null; at: number }>((resolve) =>
      proc.once("exit", (code) => resolve({ code, at: Date.now() })),
    );

    const before = await waitFor(
      "both engines captured",
      async () => {
        if (proc.exitCode !== null) throw new Error(`controller exited (${proc.exitCode}):\n${log.slice(-3000)}`);
        const engines = (await status(fleet.stateDir)).engines;
        return engines.length === 2 && engines.every((e) => e.phase === "captured") ? engines : undefined;
      },
      150_000,
    );
    const ids = before.map((e) => e.container_id).sort();

    // The daemon stops answering: every request reaches it, no response comes back.
    proxy.rules.push({ path: /.*/, action: "stall" });
    proxy.takeMaxOpen();
    const callsBefore = proxy.calls.length;
    // The observation window itself: ten resync periods of a controller facing a hung daemon.
    await sleep(10 * RESYNC_MS);
    const mostOpen = proxy.takeMaxOpen();
    const held = proxy.calls.length - callsBefore;
    expect(held, `requests that reached the hung daemon\n${log.slice(-3000)}`).toBeGreaterThan(0);
    expect(mostOpen, `most requests held open at once\n${log.slice(-3000)}`).toBeLessThanOrEqual(OPEN_BOUND);

    const signalled = Date.now();
    const logAtSignal = log.length;
    proc.kill("SIGTERM");
    const { code, at } = await exited;
    const seconds = (at - signalled) / 1000;
    const sinceSignal = () =>
      `what the controller logged after SIGTERM:\n${log.slice(logAtSignal, logAtSignal + 4000)}`;
    expect(code, sinceSignal()).toBe(0);
    expect(seconds, `SIGTERM to exit\n${sinceSignal()}`).toBeLessThanOrEqual((LONGEST_DEADLINE_MS + 5000) / 1000);
    expect(log).toMatch(/engines keep running/);
    console.log(
      `hung Docker endpoint: ${held} requests over ${10 * RESYNC_MS} ms, at most ${mostOpen} held open at once; SIGTERM to exit ${seconds.toFixed(1)} s (bound ${(LONGEST_DEADLINE_MS + 5000) / 1000} s)`,
    );

    // The daemon answers again: both engine containers are still there, running, the same ones.
    proxy.rules.length = 0;
    const after = await docker.listContainers({
      all: true,
      filters: { label: [`io.narwhal.state=${fleet.stateDir}`, "io.narwhal.purpose=engine"] },
    });
    expect(after.map((c) => c.Id).sort()).toEqual(ids);
    expect(after.map((c) => c.State)).toEqual(["running", "running"]);
  });
});
