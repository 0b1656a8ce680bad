// Two fleets on one Docker host (issue 14 item 5): fleet B, named in its fleet.json,
// converges beside fleet A without a container name colliding; A, which started
// before it had a name (containers narwhal-engine-<k>, no io.narwhal.fleet label),
// is named afterwards and adopts what runs (no second engine, nothing restarted);
// `down` of B stops only B's; a container of another fleet with A's state path is
// never swept by A. One cold converge per fleet, both at once.
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { simFleet, type SimFleet } from "../e2e/sim-fleet.js";
import { runCli, status } from "../e2e/cli.js";
import { dockerClient } from "../docker/sim-image.mjs";

describe("two fleets on one Docker host", () => {
  const docker = dockerClient(inject("dockerHost"));
  const env = { DOCKER_HOST: inject("dockerHost") };
  let a: SimFleet;
  let b: SimFleet;
  const once = (f: SimFleet) => runCli(["reconcile", "--once", "--desired", f.dir, "--state", f.stateDir], env);
  const containersOf = async (f: SimFleet) =>
    (
      await docker.listContainers({
        all: true,
        filters: { label: [`io.narwhal.state=${f.stateDir}`, "io.narwhal.purpose=engine"] },
      })
    )
      .map((c) => ({ id: c.Id, name: c.Names[0], state: c.State, fleet: c.Labels["io.narwhal.fleet"] }))
      .sort((x, y) => (x.name! < y.name! ? -1 : 1));
  const nameFleet = async (f: SimFleet, name: string) => {
    const file = path.join(f.dir, "fleet.json");
    const doc = JSON.parse(await fs.readFile(file, "utf8")) as Record<string, unknown>;
    await fs.writeFile(file, JSON.stringify({ ...doc, name }, null, 2));
  };

  beforeAll(async () => {
    const opts = { kvTransfer: { prove: false }, container: { image: inject("simImage") } };
    [a, b] = await Promise.all([simFleet(opts), simFleet(opts)]);
    await nameFleet(b, "fleet-b");
  });
  afterAll(async () => {
    for (const f of [a, b]) {
      await runCli(["down", "--state", f.stateDir], env);
      for (const c of await containersOf(f)) await docker.getContainer(c.id).remove({ force: true });
    }
  });

  it("converge side by side; naming the older fleet adopts its containers; down of one leaves the other running", async () => {
    const [ra, rb] = await Promise.all([once(a), once(b)]);
    expect(ra.code, ra.stderr).toBe(0);
    expect(rb.code, rb.stderr).toBe(0);
    const before = await containersOf(a);
    expect(before.map((c) => [c.name, c.state, c.fleet])).toEqual([
      ["/narwhal-engine-1", "running", undefined],
      ["/narwhal-engine-2", "running", undefined],
    ]);
    expect((await containersOf(b)).map((c) => [c.name, c.state, c.fleet])).toEqual([
      ["/narwhal-fleet-b-engine-1", "running", "fleet-b"],
      ["/narwhal-fleet-b-engine-2", "running", "fleet-b"],
    ]);

    // Another fleet's engine whose controller's state directory has A's path (on another machine): never A's to sweep.
    const stranger = await docker.createContainer({
      name: "narwhal-fleet-z-engine-9",
      Image: inject("simImage"),
      Entrypoint: ["/usr/bin/python3.11", "-c", "import time; time.sleep(600)"],
      Labels: {
        "io.narwhal.engine": "engine-9",
        "io.narwhal.state": a.stateDir,
        "io.narwhal.fleet": "fleet-z",
        "io.narwhal.purpose": "engine",
      },
    });
    await stranger.start();

    // The upgrade: fleet A gets a name; what runs under the old names and labels is still A's.
    await nameFleet(a, "fleet-a");
    const again = await once(a);
    expect(again.code, again.stderr).toBe(0);
    expect((await containersOf(a)).filter((c) => c.fleet !== "fleet-z")).toEqual(before);
    expect((await stranger.inspect()).State.Running).toBe(true);
    expect((await status(a.stateDir)).engines.map((e) => [e.engine, e.phase, e.container_id])).toEqual(
      before.map((c, i) => [`engine-${i + 1}`, "captured", c.id]),
    );

    const down = await runCli(["down", "--desired", b.dir, "--state", b.stateDir], env);
    expect(down.code, down.stderr).toBe(0);
    expect((await containersOf(b)).filter((c) => c.state === "running")).toEqual([]);
    expect((await containersOf(a)).filter((c) => c.fleet !== "fleet-z")).toEqual(before);
  });
});
