// The fabric check of host inspection on this machine's own interfaces (`lo`
// carries 127.0.0.1 everywhere), through the local host and the real `ip -j`:
// the interface exists and carries the engine's node IP, and for RDMA each
// HCA:port of transfer.net_devices exists under node.sysfs_root.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { EngineSpec } from "../../src/desired/types.js";
import { LocalHost } from "../../src/hosts/local.js";
import { observeFabric, parseIpAddressJson } from "../../src/phases/host/fabric.js";
import type { InspectionProblem } from "../../src/phases/inspect-problems.js";
import { engineSpec, launchRecord } from "./plan-fixtures.js";

const hosts = fileURLToPath(new URL("../fixtures/hosts/", import.meta.url));
const host = new LocalHost("fabric-node", { PATH: "/usr/local/bin:/usr/bin:/bin" });
const tool = () => ({ signal: new AbortController().signal, timeoutMs: 10_000 });

/** A valid engine on the h100x2 fixture's sysfs, changed in exactly the inputs the fabric check reads. */
function spec(o: {
  fabric_interface?: string;
  nixl_host?: string;
  transport?: "ucx_tcp" | "ucx_rdma";
  net_devices?: string[];
}): EngineSpec {
  const base = engineSpec();
  return {
    ...base,
    fabric_interface: o.fabric_interface ?? "lo",
    nixl_host: o.nixl_host ?? "127.0.0.1",
    node: { ...base.node, name: "fabric-node", sysfs_root: path.join(hosts, "h100x2", "sys") },
    launch: launchRecord({
      transfer: { transport: o.transport ?? "ucx_rdma", net_devices: o.net_devices ?? ["mlx5_0:1"], devices: [] },
    }),
  };
}

async function observe(s: EngineSpec) {
  const problems: InspectionProblem[] = [];
  const fabric = await observeFabric(host, s, tool(), problems);
  return { fabric, problems };
}

describe("parseIpAddressJson", () => {
  it("reads operstate and every local address of `ip -j address show dev IF`", () => {
    const text = JSON.stringify([
      {
        ifname: "ens8f0np0",
        operstate: "UP",
        addr_info: [
          { family: "inet", local: "10.20.0.11", prefixlen: 24 },
          { family: "inet6", local: "fe80::1", prefixlen: 64 },
        ],
      },
    ]);
    expect(parseIpAddressJson(text)).toEqual({ operstate: "UP", addresses: ["10.20.0.11", "fe80::1"] });
  });

  it("refuses output that is not ip's JSON list", () => {
    expect(() => parseIpAddressJson("[]")).toThrow(/ip -j printed/);
    expect(() => parseIpAddressJson("lo: <LOOPBACK>")).toThrow();
  });
});

describe("observeFabric on the local host", () => {
  it("sees lo carrying 127.0.0.1 and the fixture's RDMA HCA port, with no problem", async () => {
    const { fabric, problems } = await observe(spec({}));
    expect(problems).toEqual([]);
    expect(fabric).toMatchObject({ interface: "lo", present: true, carries_node_ip: true });
    expect(fabric!.addresses).toContain("127.0.0.1");
    expect(fabric!.hcas).toEqual([
      {
        name: "mlx5_0",
        port: "1",
        checked: path.join(hosts, "h100x2", "sys", "class", "infiniband", "mlx5_0", "ports", "1"),
        present: true,
      },
    ]);
    // Plain data: what the state file and inspection.json keep.
    expect(JSON.parse(JSON.stringify(fabric))).toEqual(fabric);
  });

  it("outwaits an interface the node does not have, naming NARWHAL_FABRIC_INTERFACE and the node", async () => {
    const { fabric, problems } = await observe(spec({ fabric_interface: "nwfab-none0", transport: "ucx_tcp" }));
    expect(fabric).toMatchObject({ interface: "nwfab-none0", present: false, carries_node_ip: null });
    expect(problems).toEqual([
      expect.objectContaining({
        message: "fabric interface nwfab-none0 does not exist on node fabric-node",
        input: "fabric_interface (NARWHAL_FABRIC_INTERFACE)",
        failure: "outwait",
      }),
    ]);
  });

  it("reports, terminally, an interface that does not carry the engine's node IP", async () => {
    const { fabric, problems } = await observe(spec({ nixl_host: "192.0.2.77", transport: "ucx_tcp" }));
    expect(fabric).toMatchObject({ present: true, carries_node_ip: false });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ input: expect.stringContaining("NARWHAL_NODE_1_IP"), failure: "terminal" });
    expect(problems[0]!.message).toMatch(
      /fabric interface lo on node fabric-node does not carry 192\.0\.2\.77 \(it has .*127\.0\.0\.1/,
    );
    expect(problems[0]!.fix).toContain("rerun discovery");
  });

  it("does not compare a wildcard or a host name with the interface's addresses", async () => {
    for (const nixl_host of ["0.0.0.0", "localhost"]) {
      const { fabric, problems } = await observe(spec({ nixl_host, transport: "ucx_tcp" }));
      expect(problems).toEqual([]);
      expect(fabric).toMatchObject({ present: true, carries_node_ip: null });
    }
  });

  it("outwaits an RDMA HCA or port missing under node.sysfs_root, naming its net_devices entry", async () => {
    const { fabric, problems } = await observe(spec({ net_devices: ["mlx5_0:1", "mlx5_0:2", "mlx5_7"] }));
    expect(fabric!.hcas.map((h) => [h.name, h.port, h.present])).toEqual([
      ["mlx5_0", "1", true],
      ["mlx5_0", "2", false],
      ["mlx5_7", undefined, false],
    ]);
    expect(problems.map((p) => [p.input, p.failure])).toEqual([
      ["launch.transfer.net_devices[1]", "outwait"],
      ["launch.transfer.net_devices[2]", "outwait"],
    ]);
    expect(problems[0]!.message).toContain("RDMA device mlx5_0:2 is missing on node fabric-node");
  });

  it("checks no HCA for TCP and nothing at all without a fabric interface", async () => {
    expect((await observe(spec({ transport: "ucx_tcp", net_devices: ["mlx5_9:1"] }))).fabric!.hcas).toEqual([]);
    expect(await observe(spec({ fabric_interface: "" }))).toEqual({ fabric: null, problems: [] });
  });
});
