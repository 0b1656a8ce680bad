import { describe, expect, it } from "vitest";
import { NodeHosts } from "../../src/hosts/node-hosts.js";
import { SshHost } from "../../src/hosts/ssh.js";
import type { LocalHost } from "../../src/hosts/local.js";
import { sshDockerHost } from "../../src/desired/node-host.js";
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

  it("looks python3 up once for every node record that is this machine; a node over ssh has its own", () => {
    const h = hosts();
    h.learn([node("a"), node("a2"), node("b", { destination: "root@10.0.0.2", port: 22 })]);
    expect(h.access("a2").helperPython).toBe(h.access("a").helperPython);
    expect(h.local().helperPython).toBe(h.access("a").helperPython);
    expect(h.access("b").helperPython).not.toBe(h.access("a").helperPython);
  });

  it("reads the operator's files of every node record that is this machine through one file helper", () => {
    const h = hosts();
    h.learn([node("a"), node("a2")]);
    const [a, a2] = [h.access("a"), h.access("a2")] as LocalHost[];
    expect(a!.fileHelper).toBe(a2!.fileHelper);
    expect((h.local() as LocalHost).fileHelper).toBe(a!.fileHelper);
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

  it("dials a node's default ssh:// Docker endpoint over that node's own ssh access; others over the operator's defaults", () => {
    const h = hosts();
    const ssh = { destination: "narwhal@fd00::12", port: 2222, identity_file: "/keys/id" };
    h.learn([node("a"), node("gpu-b", ssh), node("gpu-c", { destination: "GPU-C", port: 22 })]);
    expect(h.sshForDockerHost(sshDockerHost(ssh))).toBe(h.access("gpu-b"));
    // The URL's spelling of one endpoint: host case, and port 22 written out or not.
    expect(h.sshForDockerHost("ssh://gpu-c:22")).toBe(h.access("gpu-c"));
    // Another user on gpu-b's address is not gpu-b's record: reached with ssh's own defaults, named by the endpoint.
    const other = h.sshForDockerHost("ssh://root@[fd00::12]:2222");
    expect(other).toBeInstanceOf(SshHost);
    expect(other).not.toBe(h.access("gpu-b"));
    expect(other.node).toBe("ssh://root@[fd00::12]:2222");
    expect(h.sshForDockerHost("ssh://root@[fd00::12]:2222")).toBe(other);
  });

  it("refuses a ssh:// endpoint ssh would read as an option", () => {
    const err: unknown = (() => {
      try {
        return hosts().sshForDockerHost("ssh://-oProxyCommand=x");
      } catch (e) {
        return e;
      }
    })();
    expect(err).toMatchObject({ retryable: false, input: "docker_host ssh://-oProxyCommand=x" });
    expect((err as Error).message).toMatch(/starts with "-"/);
  });
});
