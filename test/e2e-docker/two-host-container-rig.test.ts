// Issue 10's acceptance, container backend: one controller brings up a P/D
// fleet on two rig hosts (network namespaces, each with its own sshd and
// dockerd) with `reconcile --once`, reaching each host's Docker daemon only
// through its node's ssh:// endpoint. Each engine's container runs on its own
// host's daemon, in that host's network namespace, and advertises its node's
// address as its NIXL side channel.
import fs from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRig, type Rig, type RigHost } from "../rig/rig.js";
import { runCli, status } from "../e2e/cli.js";
import { rigFleet, RIG_PORTS, type RigFleet } from "../e2e/rig-fleet.js";

let rig: Rig;
let a: RigHost;
let b: RigHost;
let fleet: RigFleet;

beforeAll(async () => {
  rig = await createRig({ hosts: 2, docker: true });
  [a, b] = rig.hosts as [RigHost, RigHost];
  fleet = await rigFleet([a, b], { container: { image: rig.simImage!.id } });
});

afterAll(async () => {
  if (fleet) await runCli(["down", "--desired", fleet.dir, "--state", fleet.stateDir]);
  await rig?.teardown();
});

describe("a two-host P/D fleet, container backend, one controller over ssh", () => {
  it("converges with each container on its own host's daemon and namespace, advertising its node's address", async () => {
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    const view = await status(fleet.stateDir, fleet.dir);
    expect(view.engines.map((e) => [e.engine, e.phase])).toEqual([
      ["engine-1", "captured"],
      ["engine-2", "captured"],
    ]);
    for (const [engine, host, other] of [
      ["engine-1", a, b],
      ["engine-2", b, a],
    ] as const) {
      const id = view.engines.find((e) => e.engine === engine)!.container_id!;
      // On its own host's daemon, and only there.
      const info = await host.docker!.client.getContainer(id).inspect();
      await expect(other.docker!.client.getContainer(id).inspect()).rejects.toThrow();
      expect(info.State.Running).toBe(true);
      expect(String((await fs.stat(`/proc/${info.State.Pid}/ns/net`)).ino)).toBe(await host.netnsInode());
      const env = Object.fromEntries(
        (info.Config.Env ?? []).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
      );
      expect(env.VLLM_NIXL_SIDE_CHANNEL_HOST).toBe(host.address);
      expect(env.VLLM_NIXL_SIDE_CHANNEL_PORT).toBe(String(RIG_PORTS.nixl));
    }
    // A second run finds both and starts nothing.
    const again = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(again.code, again.stderr).toBe(0);
    const after = await status(fleet.stateDir, fleet.dir);
    expect(after.engines.map((e) => e.container_id)).toEqual(view.engines.map((e) => e.container_id));
  });
});
