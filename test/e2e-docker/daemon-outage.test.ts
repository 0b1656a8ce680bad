// Causes outside narwhal's control, on a real Docker Engine the test owns (a
// private dockerd it stops and starts, so the shared one other tests use is
// never touched): an image not on the host yet, and the daemon itself going
// away while an engine is being restarted. Both are outwaited by one watch-mode
// controller — far past its attempt budget — and the engine converges once the
// cause is gone, without a controller restart.
import { afterAll, describe, expect, it } from "vitest";
import type { ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { simFleet, type SimFleet } from "../e2e/sim-fleet.js";
import { TEST_ENV, runCli, startCli, status, waitFor } from "../e2e/cli.js";
import { startPrivateDaemon, type PrivateDaemon } from "../docker/daemon.js";
import { ensureSimImage, simImageHash, SIM_REPO } from "../docker/sim-image.mjs";

type Engine = Awaited<ReturnType<typeof status>>["engines"][number];

const budget = Number(TEST_ENV.NARWHAL_RETRY_MAX_ATTEMPTS);
const failuresSince = (e: Engine, since: number) => e.history.filter((h) => h.to === "failed" && Date.parse(h.at) >= since).length;
const engine = async (stateDir: string) => (await status(stateDir)).engines[0];

describe("causes outside narwhal's control on a Docker daemon the test stops and starts", () => {
  let runDir: string;
  let daemon: PrivateDaemon | undefined;
  let fleet: SimFleet | undefined;
  let controller: ChildProcess | undefined;
  let log = "";

  afterAll(async () => {
    if (controller && controller.exitCode === null) {
      controller.kill("SIGTERM");
      await new Promise((r) => controller!.once("exit", r));
    }
    if (fleet && daemon) await runCli(["down", "--state", fleet.stateDir], { DOCKER_HOST: daemon.host });
    await daemon?.stop();
    if (runDir) await fs.rm(runDir, { recursive: true, force: true });
  });

  it("outwaits an image not on the host, then a daemon outage while the engine restarts, and converges after each", async () => {
    // A short path: the daemon's unix socket lives in it.
    runDir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-outage-"));
    const dataRoot = path.join(runDir, "data");
    daemon = await startPrivateDaemon({ runDir: path.join(runDir, "d"), dataRoot });
    const env = { DOCKER_HOST: daemon.host };
    const tag = `${SIM_REPO}:${await simImageHash({ variant: "a" })}`;
    fleet = await simFleet({ engines: [{}], container: { image: tag } });
    controller = startCli(["reconcile", "--desired", fleet.dir, "--state", fleet.stateDir], env);
    controller.stdout!.on("data", (d) => (log += d));
    controller.stderr!.on("data", (d) => (log += d));
    const stateDir = fleet.stateDir;

    // 1. The image is not on this daemon yet: outwaited, not a terminal error.
    const noImage = await waitFor("re-checks of the missing image past the budget, or a terminal failure", async () => {
      const e = await engine(stateDir);
      return e?.phase === "failed" && (failuresSince(e, 0) > 2 * budget || e.retry_at === null) ? e : undefined;
    });
    expect(noImage.retry_at, JSON.stringify(noImage.history.slice(-8), null, 1)).not.toBeNull();
    expect(noImage).toMatchObject({ attempts: 0, last_error: { step: "inspect", failure: "outwait" } });
    expect(noImage.last_error!.message).toMatch(/is not present on/);
    await ensureSimImage({ docker: daemon.docker, variant: "a" });
    const first = await waitFor("captured once the image is there", async () => {
      const e = await engine(stateDir);
      return e?.phase === "captured" ? e : undefined;
    }, 120_000);

    // 2. The engine dies; while the controller restarts it, the daemon goes away.
    await daemon.docker.getContainer(first.container_id!).kill();
    await waitFor("the restart under way", async () => {
      const e = await engine(stateDir);
      return e && e.phase !== "captured" ? e : undefined;
    }, 30_000);
    const downAt = Date.now();
    await daemon.halt();
    const outage = await waitFor("re-checks through the outage past the budget, or a terminal failure", async () => {
      const e = await engine(stateDir);
      return e?.phase === "failed" && (failuresSince(e, downAt) > 2 * budget || e.retry_at === null) ? e : undefined;
    });
    expect(outage.retry_at, JSON.stringify(outage.history.slice(-8), null, 1)).not.toBeNull();
    expect(outage.last_error).toMatchObject({ failure: "outwait", retryable: true });
    expect(outage.last_error!.message).toMatch(/ENOENT|ECONNREFUSED|ECONNRESET|shutting down/);
    expect(log).toMatch(/outwaiting a cause outside narwhal's control since/);

    // 3. The daemon returns (same data, same socket): the same controller converges the engine.
    const outageSeconds = (Date.now() - downAt) / 1000;
    daemon = await startPrivateDaemon({ runDir: path.join(runDir, "d"), dataRoot });
    const after = await waitFor("captured after the daemon returned", async () => {
      const e = await engine(stateDir);
      return e?.phase === "captured" && e.container_id !== first.container_id ? e : undefined;
    }, 120_000);
    expect(controller.exitCode).toBeNull(); // never restarted
    expect(after.last_error).toBeNull();
    const running = await daemon.docker.listContainers({ filters: { label: [`io.narwhal.state=${stateDir}`, "io.narwhal.purpose=engine"] } });
    expect(running.map((c) => c.Id)).toEqual([after.container_id]);
    process.stdout.write(`daemon outage: down ${outageSeconds.toFixed(1)} s, ${failuresSince(after, downAt)} outwaited re-checks, converged with no controller restart\n`);
  });
});
