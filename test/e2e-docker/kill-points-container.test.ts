// Kill-point campaign on the container backend: SIGKILL the controller around
// every Docker side effect (create, start, stop, remove), rerun, and check:
// one container per engine, no orphans, evidence intact.
import { afterAll, describe, expect, inject, it } from "vitest";
import { simFleet, type SimFleet, type SimFleetOptions } from "../e2e/sim-fleet.js";
import { runCli } from "../e2e/cli.js";
import { assertConverged, killAt, killSpec, reconcileOnce, type KillPoint } from "../e2e/campaign.js";
import { dockerClient } from "../docker/sim-image.mjs";

const ENGINES = ["engine-1", "engine-2"];
const tally = { points: new Set<string>(), runs: 0 };
const at = (names: string[], hits: number[]): KillPoint[] => names.flatMap((name) => hits.map((hit) => ({ name, hit })));

const COLD = at(["docker:check:running", "docker:create:before", "docker:create:after", "docker:start:before", "docker:start:after"], [1]);
const REPLACE = at(["docker:stop:before", "docker:stop:after", "docker:remove:before", "docker:remove:after", "docker:create:after"], [1]);

describe("kill-point campaign (container)", () => {
  const docker = dockerClient(inject("dockerHost"));
  const env = { DOCKER_HOST: inject("dockerHost") };
  const opts = (o: Partial<SimFleetOptions> = {}): SimFleetOptions => ({ container: { image: inject("simImage") }, ...o });
  const containers = (stateDir: string) => async () =>
    (await docker.listContainers({ all: true, filters: { label: [`io.narwhal.state=${stateDir}`] } })).map((c) => ({ engine: c.Labels["io.narwhal.engine"]!, id: c.Id }));
  const cleanup = async (stateDir: string) => {
    await runCli(["down", "--state", stateDir], env);
    for (const c of await containers(stateDir)()) await docker.getContainer(c.id).remove({ force: true }).catch(() => undefined);
  };

  afterAll(() => {
    console.log(`kill-point campaign (container): ${tally.points.size} kill points, ${tally.runs} killed runs, each followed by a clean rerun`);
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

  describe("replacement of engine-2", () => {
    let fleet: SimFleet;
    let engine1 = "";
    let generation = 0;
    afterAll(() => cleanup(fleet.stateDir));
    for (const point of REPLACE) {
      it(`SIGKILL at ${killSpec(point)}, then rerun`, async () => {
        if (!fleet) {
          fleet = await simFleet(opts());
          expect((await reconcileOnce(fleet, env)).code).toBe(0);
          engine1 = (await assertConverged(fleet, ENGINES, containers(fleet.stateDir)))["engine-1"]!.id;
        }
        await fleet.write(opts({ engines: [{}, { extraArgs: ["--max-num-seqs", String(100 + ++generation)] }] }));
        await killAt(fleet, point, env);
        tally.points.add(`replace/${killSpec(point)}`);
        tally.runs++;
        const r = await reconcileOnce(fleet, env);
        expect(r.code, r.stderr.slice(-3000)).toBe(0);
        const live = await assertConverged(fleet, ENGINES, containers(fleet.stateDir));
        expect(live["engine-1"]!.id, "the unchanged engine is never touched").toBe(engine1);
      });
    }
  });
});
