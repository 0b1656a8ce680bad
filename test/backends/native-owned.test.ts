// On which node a recorded native handle's process is looked for: the handle's
// own node when the command learned it; a handle from before nodes were named
// is the controller's machine; a node this command did not learn (down or status
// without a loadable desired/) is this machine only when the handle's boot id is
// this machine's current one, else an error naming the node and the fix.
import { describe, expect, it } from "vitest";
import { nativeHostFor, ownedIn, type ProcessTable } from "../../src/backends/native-owned.js";
import { LocalHost } from "../../src/hosts/local.js";
import { readBootId } from "../../src/backends/proc.js";
import { NodeHosts } from "../../src/hosts/node-hosts.js";
import { NarwhalError } from "../../src/errors.js";
import type { EngineHandle } from "../../src/phases/types.js";
import { nodeRecord } from "../hosts/node-fixture.js";

const node = nodeRecord;

async function handle(fields: { node?: string; boot_id?: string }): Promise<Extract<EngineHandle, { kind: "native" }>> {
  return {
    kind: "native",
    pid: 1,
    pgid: 1,
    start_ticks: 1,
    launch_token: "t",
    boot_id: fields.boot_id ?? (await readBootId()),
    ...(fields.node !== undefined ? { node: fields.node } : {}),
  };
}

describe("nativeHostFor", () => {
  const hosts = () => new NodeHosts({ stateDir: "/tmp/nw-state", clientEnv: {} });

  it("reaches a learned node as learned: an ssh node over ssh", async () => {
    const h = hosts();
    h.learn([node("gpu-a", { destination: "root@10.0.0.2", port: 22 }), node("here")]);
    expect(await nativeHostFor(h, await handle({ node: "gpu-a", boot_id: "elsewhere" }))).toBe(h.access("gpu-a"));
    expect((await nativeHostFor(h, await handle({ node: "here" }))).kind).toBe("local");
  });

  it("reads a handle that names no node on the controller's machine", async () => {
    const found = await nativeHostFor(hosts(), await handle({ boot_id: "an-earlier-boot" }));
    expect(found.kind).toBe("local");
  });

  it("takes an unlearned node's handle as local only when its boot id is this machine's", async () => {
    const h = hosts();
    expect((await nativeHostFor(h, await handle({ node: "gpu-a" }))).kind).toBe("local");
    const err: unknown = await nativeHostFor(h, await handle({ node: "gpu-a", boot_id: "another-machine" })).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(NarwhalError);
    expect(err).toMatchObject({
      message: expect.stringContaining("node gpu-a"),
      fix: expect.stringContaining("gpu-a"),
    });
  });

  it("in a role shell, names every unlearned node as this machine, under its own name", async () => {
    const h = new NodeHosts({ stateDir: "/tmp/nw-state", clientEnv: {}, roleShell: true });
    const found = await nativeHostFor(h, await handle({ node: "gpu-a", boot_id: "another-boot" }));
    expect(found).toMatchObject({ kind: "local", node: "gpu-a" });
    expect(h.access("gpu-a")).toBe(found);
  });
});

// Local node records are all this machine: listOwned reads its process table once and gives each
// record the engines its NARWHAL_NODE names (a 1000-engine fleet of local records read /proc per record).
describe("ownedIn: one process table, several local node records", () => {
  const leader = (pid: number) => ({ pid, pgid: pid, startTicks: 100 + pid, state: "S" });
  const table: ProcessTable = {
    bootId: "boot-1",
    leaders: [leader(1001), leader(1002), leader(1003), leader(1004)],
    envs: new Map([
      [1001, { NARWHAL_LAUNCH_TOKEN: "t1", NARWHAL_STATE_DIR: "/s", NARWHAL_ENGINE: "engine-1", NARWHAL_NODE: "a" }],
      [1002, { NARWHAL_LAUNCH_TOKEN: "t2", NARWHAL_STATE_DIR: "/s", NARWHAL_ENGINE: "engine-2", NARWHAL_NODE: "b" }],
      [1003, { NARWHAL_LAUNCH_TOKEN: "t3", NARWHAL_STATE_DIR: "/s", NARWHAL_ENGINE: "engine-3", NARWHAL_NODE: "a" }],
      // Another controller's engine on the same machine: nobody's here.
      [
        1004,
        { NARWHAL_LAUNCH_TOKEN: "t4", NARWHAL_STATE_DIR: "/other", NARWHAL_ENGINE: "engine-1", NARWHAL_NODE: "a" },
      ],
    ]),
    cwds: new Map([[1001, "/s/runs/engine-1/r1"]]),
  };

  it("each record gets the engines named for it, with its node and the table's boot id", () => {
    const a = ownedIn(new LocalHost("a", {}), table, "/s");
    const b = ownedIn(new LocalHost("b", {}), table, "/s");
    expect(a.map((o) => [o.engine, o.handle])).toEqual([
      ["engine-1", expect.objectContaining({ pid: 1001, start_ticks: 1101, boot_id: "boot-1", node: "a" })],
      ["engine-3", expect.objectContaining({ pid: 1003, node: "a" })],
    ]);
    // The run directory is the scan's cwd (a local node's own path); none where the scan read none.
    expect(a.map((o) => o.run_dir)).toEqual(["/s/runs/engine-1/r1", undefined]);
    expect(b.map((o) => [o.engine, (o.handle as { node?: string }).node])).toEqual([["engine-2", "b"]]);
  });
});
