// Causes outside narwhal's control, on a real Docker Engine the test owns (a
// private dockerd it stops and starts, so the shared one other tests use is
// never touched): an image not on the host yet, and the daemon itself going
// away while an engine is being restarted. Both are outwaited by one watch-mode
// controller — far past its attempt budget — and the engine converges once the
// cause is gone, without a controller restart.
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { simFleet, type SimEngineOptions, type SimFleet } from "../e2e/sim-fleet.js";
import { runCli, startCli, status, waitFor } from "../e2e/cli.js";
import { startPrivateDaemon, type PrivateDaemon } from "../docker/daemon.js";
import { ensureSimImage } from "../docker/sim-image.mjs";

type Engine = Awaited<ReturnType<typeof status>>["engines"][number];

// A daemon shutting down still answers for a few seconds, with errors of its own (a 500 from a
// network store already closed): those count as attempts, as any daemon error does, so the budget
// leaves room for the engine's own loss and one or two of them before the socket goes away.
const budget = 4;
const failuresSince = (e: Engine, since: number) =>
  e.history.filter((h) => h.to === "failed" && Date.parse(h.at) >= since).length;
const engine = async (stateDir: string) => (await status(stateDir)).engines[0];

describe("causes outside narwhal's control on a Docker daemon the test stops and starts", () => {
  let runDir: string;
  let dataRoot: string;
  let daemon: PrivateDaemon;
  let image: string;
  let current: { fleet: SimFleet; controller: ChildProcess; log: () => string } | undefined;

  /** One engine on the private daemon under a watch-mode controller. */
  async function watchFleet(engine: SimEngineOptions = {}) {
    const fleet = await simFleet({ engines: [engine], container: { image } });
    const controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir], {
      DOCKER_HOST: daemon.host,
      NARWHAL_RETRY_MAX_ATTEMPTS: String(budget),
    });
    let log = "";
    controller.stdout!.on("data", (d) => (log += d));
    controller.stderr!.on("data", (d) => (log += d));
    current = { fleet, controller, log: () => log };
    return current;
  }

  beforeAll(async () => {
    // A short path: the daemon's unix socket lives in it.
    runDir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-outage-"));
    dataRoot = path.join(runDir, "data");
    daemon = await startPrivateDaemon({ runDir: path.join(runDir, "d"), dataRoot });
    // The id is known before the image is loaded: the build is reproducible.
    image = inject("simImageId");
  });
  // Engine containers are named narwhal-<engine> per daemon: each test's fleet goes before the next.
  afterEach(async () => {
    if (!current) return;
    const { fleet, controller } = current;
    current = undefined;
    if (controller.exitCode === null) {
      controller.kill("SIGTERM");
      await new Promise((r) => controller.once("exit", r));
    }
    await runCli(["down", "--state", fleet.stateDir], { DOCKER_HOST: daemon.host });
  });
  afterAll(async () => {
    await daemon?.stop();
    if (runDir) await fs.rm(runDir, { recursive: true, force: true });
  });

  it("outwaits an image not on the host past the attempt budget, and converges once it is loaded", async () => {
    const { fleet } = await watchFleet();
    const noImage = await waitFor("re-checks of the missing image past the budget, or a terminal failure", async () => {
      const e = await engine(fleet.stateDir);
      return e?.phase === "failed" && (failuresSince(e, 0) > 2 * budget || e.retry_at === null) ? e : undefined;
    });
    expect(noImage.retry_at, JSON.stringify(noImage.history.slice(-8), null, 1)).not.toBeNull();
    expect(noImage).toMatchObject({ attempts: 0, last_error: { step: "inspect", failure: "outwait" } });
    expect(noImage.last_error!.message).toMatch(/is not present on/);
    await ensureSimImage({ docker: daemon.docker, variant: "a" });
    const captured = await waitFor(
      "captured once the image is there",
      async () => {
        const e = await engine(fleet.stateDir);
        return e?.phase === "captured" ? e : undefined;
      },
      120_000,
    );
    expect(captured.attempts).toBe(0);
  });

  it("outwaits a daemon outage while the engine restarts, and the same controller converges it once the daemon answers", async () => {
    await ensureSimImage({ docker: daemon.docker, variant: "a" });
    // Each start waits 5 s before it listens, so the restart below is under way (not captured) for 5 s at least,
    // several status polls even on a loaded machine. Without it the whole restart took 1.5 s on an idle machine: a
    // poll that missed it halted the daemon under a captured engine, and the test waited out an outage never seen.
    const { fleet, controller, log } = await watchFleet({ faults: "slow_start=5" });
    const stateDir = fleet.stateDir;
    const first = await waitFor(
      "captured",
      async () => {
        const e = await engine(stateDir);
        return e?.phase === "captured" ? e : undefined;
      },
      120_000,
    );

    // The engine dies; while the controller restarts it, the daemon goes away.
    await daemon.docker.getContainer(first.container_id!).kill();
    await waitFor(
      "the restart under way",
      async () => {
        const e = await engine(stateDir);
        return e && e.phase !== "captured" ? e : undefined;
      },
      30_000,
    );
    const downAt = Date.now();
    await daemon.halt();
    const outage = await waitFor("re-checks through the outage past the budget, or a terminal failure", async () => {
      const e = await engine(stateDir);
      return e?.phase === "failed" && (failuresSince(e, downAt) > 2 * budget || e.retry_at === null) ? e : undefined;
    });
    expect(outage.retry_at, JSON.stringify(outage.history.slice(-8), null, 1)).not.toBeNull();
    expect(outage.last_error).toMatchObject({ engine: "engine-1", failure: "outwait", retryable: true });
    expect(outage.last_error!.step).toMatch(/^(inspect|check|start)$/);
    expect(outage.last_error!.message).toMatch(/ENOENT|ECONNREFUSED|ECONNRESET|shutting down/);
    expect(log()).toMatch(/outwaiting a cause outside narwhal's control since/);

    // The daemon returns (same data, same socket): the same controller converges the engine.
    const outageSeconds = (Date.now() - downAt) / 1000;
    daemon = await startPrivateDaemon({ runDir: path.join(runDir, "d"), dataRoot });
    const after = await waitFor(
      "captured after the daemon returned",
      async () => {
        const e = await engine(stateDir);
        return e?.phase === "captured" && e.container_id !== first.container_id ? e : undefined;
      },
      120_000,
    );
    expect(controller.exitCode).toBeNull(); // never restarted
    expect(after.last_error).toBeNull();
    const running = await daemon.docker.listContainers({
      filters: { label: [`io.narwhal.state=${stateDir}`, "io.narwhal.purpose=engine"] },
    });
    expect(running.map((c) => c.Id)).toEqual([after.container_id]);
    process.stdout.write(
      `daemon outage: down ${outageSeconds.toFixed(1)} s, ${failuresSince(after, downAt)} outwaited re-checks, converged with no controller restart\n`,
    );
  });
});
