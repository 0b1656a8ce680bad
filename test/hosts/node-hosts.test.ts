import { describe, expect, it } from "vitest";
import { NodeHosts } from "../../src/hosts/node-hosts.js";
import { nodeRecord } from "./node-fixture.js";

const node = nodeRecord;

describe("NodeHosts", () => {
  const hosts = () => new NodeHosts({ stateDir: "/tmp/nw-state", clientEnv: {} });

  it("reaches a node without ssh locally and one with ssh over ssh", () => {
    const h = hosts();
    h.learn([node("a"), node("b", { destination: "root@10.0.0.2", port: 22 })]);
    expect(h.access("a").kind).toBe("local");
    expect(h.access("b").kind).toBe("ssh");
    expect(h.access({ name: "b" }).node).toBe("b");
  });

  it("keeps one access per node while its target stays, and a new one when it changes", () => {
    const h = hosts();
    h.learn([node("b", { destination: "root@10.0.0.2", port: 22 })]);
    const first = h.access("b");
    h.learn([node("b", { destination: "root@10.0.0.2", port: 22 })]);
    expect(h.access("b")).toBe(first);
    h.learn([node("b", { destination: "root@10.0.0.3", port: 22 })]);
    expect(h.access("b")).not.toBe(first);
  });

  it("names an unknown node and the fix", () => {
    expect(() => hosts().access("gone")).toThrow(/node gone is not in the desired fleet.*/);
  });

  it("puts a remote run's files under the node's work_dir; a local run keeps the controller's directory", () => {
    const h = hosts();
    h.learn([node("a"), node("b", { destination: "root@10.0.0.2", port: 22 })]);
    const run = "/var/lib/narwhal/state/runs/engine-2/20261201T000000Z-abcd1234";
    expect(h.runDirOnNode("a", run)).toBe(run);
    expect(h.runDirOnNode("b", run)).toBe("/srv/narwhal/runs/engine-2/20261201T000000Z-abcd1234");
  });
});
