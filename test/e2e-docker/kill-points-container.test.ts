// Kill-point campaign on the container backend: SIGKILL the controller around
// every Docker side effect (create, start, stop, remove), rerun, and check:
// one container per engine, no orphans, evidence intact.
import { afterAll, describe, expect, inject, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { simFleet, type SimFleet, type SimFleetOptions } from "../e2e/sim-fleet.js";
import { runCli, status } from "../e2e/cli.js";
import { assertConverged, editCheckedPlan, killAt, killSpec, reconcileOnce, type KillPoint } from "../e2e/campaign.js";
import { dockerClient } from "../docker/sim-image.mjs";
import { engineLabels } from "../../src/backends/container-labels.js";

const ENGINES = ["engine-1", "engine-2"];
const tally = { points: new Set<string>(), runs: 0 };
const at = (names: string[], hits: number[]): KillPoint[] =>
  names.flatMap((name) => hits.map((hit) => ({ name, hit })));

const COLD = at(
  ["docker:check:running", "docker:create:before", "docker:create:after", "docker:start:before", "docker:start:after"],
  [1],
);
const REPLACE = at(
  ["docker:stop:before", "docker:stop:after", "docker:remove:before", "docker:remove:after", "docker:create:after"],
  [1],
);

describe("kill-point campaign (container)", () => {
  const docker = dockerClient(inject("dockerHost"));
  const env = { DOCKER_HOST: inject("dockerHost") };
  const opts = (o: Partial<SimFleetOptions> = {}): SimFleetOptions => ({
    container: { image: inject("simImage") },
    ...o,
  });
  const containers = (stateDir: string) => async () =>
    (await docker.listContainers({ all: true, filters: { label: [`io.narwhal.state=${stateDir}`] } })).map((c) => ({
      engine: c.Labels["io.narwhal.engine"]!,
      id: c.Id,
    }));
  const cleanup = async (stateDir: string) => {
    await runCli(["down", "--state", stateDir], env);
    for (const c of await containers(stateDir)())
      await docker
        .getContainer(c.id)
        .remove({ force: true })
        .catch(() => undefined);
  };

  afterAll(() => {
    console.log(
      `kill-point campaign (container): ${tally.points.size} kill points, ${tally.runs} killed runs, each followed by a clean rerun`,
    );
  });

  for (const point of COLD) {
    it(`cold start: SIGKILL at ${killSpec(point)}, then rerun`, async () => {
      const fleet = await simFleet(opts());
      try {
        await killAt(fleet, point, env);
        tally.points.add(killSpec(point));
        tally.runs++;
        const r = await reconcileOnce(fleet, env);
        expect(r.code, r.stderr.slice(-3000)).toBe(0);
        await assertConverged(fleet, ENGINES, containers(fleet.stateDir));
      } finally {
        await cleanup(fleet.stateDir);
      }
    });
  }

  describe("a checked plan tampered with while the controller is down", () => {
    const failedAt = async (fleet: SimFleet, engine: string) => {
      const e = (await status(fleet.stateDir)).engines.find((x) => x.engine === engine)!;
      expect(e.phase).toBe("failed");
      return e.last_error!;
    };

    it("an edited launch.json is refused before any container is created", async () => {
      const fleet = await simFleet(opts());
      try {
        // At create:before the start step has waited for `checked` to be on disk; no container exists yet.
        await killAt(fleet, { name: "docker:create:before", hit: 1 }, env);
        const edit = await editCheckedPlan(fleet);
        const r = await reconcileOnce(fleet, env);
        expect(r.code, r.stderr.slice(-3000)).toBe(2);
        const error = await failedAt(fleet, edit.engine);
        expect(error).toMatchObject({ step: "start", retryable: false, input: edit.planFile });
        for (const s of [edit.planFile, edit.checkedSha, edit.editedSha]) expect(error.message).toContain(s);
        expect(
          await docker.listContainers({ all: true, filters: { label: [`io.narwhal.run=${edit.runDir}`] } }),
          "nothing was created from the edited plan",
        ).toEqual([]);
      } finally {
        await cleanup(fleet.stateDir);
      }
    });

    it("a container bearing the run's launch token but another command is refused, never started", async () => {
      const fleet = await simFleet(opts());
      try {
        await killAt(fleet, { name: "docker:create:before", hit: 1 }, env);
        const victim = (await status(fleet.stateDir)).engines.find((e) => e.phase === "checked")!;
        const runDir = victim.run_dir!;
        const plan = JSON.parse(await fs.readFile(path.join(runDir, "launch.json"), "utf8"));
        // A container planted with this run's labels (as a create by a tampered controller would leave it), wrapping the command.
        const run = {
          engine: victim.engine,
          dir: runDir,
          input_hash: plan.input_hash,
          plan_sha256: victim.plan_sha256!,
          launch_token: plan.launch_token,
        };
        const planted = await docker.createContainer({
          Image: plan.image.id,
          Entrypoint: ["/bin/sh", "-c", 'touch /tmp/planted-ran; exec "$@"', "sh"],
          Cmd: plan.command,
          Env: [
            ...Object.entries(plan.environment as Record<string, string>).map(([k, v]) => `${k}=${v}`),
            "PLANTED=1",
          ],
          Labels: engineLabels(run, plan, fleet.stateDir),
          HostConfig: { NetworkMode: "host" },
        });
        const r = await reconcileOnce(fleet, env);
        expect(r.code, r.stderr.slice(-3000)).toBe(2);
        const error = await failedAt(fleet, victim.engine);
        expect(error).toMatchObject({ step: "start", retryable: false });
        expect(error.message).toContain(`container ${planted.id.slice(0, 12)} carries the launch token of ${runDir}`);
        expect(error.message).toMatch(/its entrypoint .* is not narwhal's/);
        expect(error.message).toMatch(/its environment differs from the plan's .* in PLANTED/);
        const info = await planted.inspect();
        expect(info.State.Status, "the planted container was started").toBe("created");
        expect(info.State.StartedAt).toMatch(/^0001-/);
      } finally {
        await cleanup(fleet.stateDir);
      }
    });
  });

  describe("replacement of engine-2", () => {
    let fleet: SimFleet;
    let engine1 = "";
    let generation = 0;
    afterAll(() => cleanup(fleet.stateDir));
    for (const point of REPLACE) {
      it(`SIGKILL at ${killSpec(point)}, then rerun`, async () => {
        if (!fleet) {
          // Each replacement edits engine-2's runtime alone, which splits the pair into two groups (seed 000),
          // where a proof would rightly find no pair: this fleet does not prove (the cold campaign's do).
          fleet = await simFleet(opts({ kvTransfer: { prove: false } }));
          expect((await reconcileOnce(fleet, env)).code).toBe(0);
          engine1 = (await assertConverged(fleet, ENGINES, containers(fleet.stateDir), { proofs: false }))["engine-1"]!
            .id;
        }
        await fleet.write(opts({ engines: [{}, { extraArgs: ["--max-num-seqs", String(100 + ++generation)] }] }));
        await killAt(fleet, point, env);
        tally.points.add(`replace/${killSpec(point)}`);
        tally.runs++;
        const r = await reconcileOnce(fleet, env);
        expect(r.code, r.stderr.slice(-3000)).toBe(0);
        const live = await assertConverged(fleet, ENGINES, containers(fleet.stateDir), { proofs: false });
        expect(live["engine-1"]!.id, "the unchanged engine is never touched").toBe(engine1);
      });
    }
  });
});
