// Rules about where a node is (issue 10 item 2): ssh destination syntax, the
// key and known_hosts files, work_dir, and node records naming one host.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { ValidationIssue } from "../../src/errors.js";
import { issuesOf, rec, validTree, type Obj } from "./fixtures.js";
import { issuesWithFiles, nodes, twoNodeTree } from "./node-fixtures.js";

const only = (issues: ValidationIssue[], rule: string) => issues.filter((i) => i.rule === rule);

describe("node-ssh-destination", () => {
  it.each([
    ["-oProxyCommand=touch /tmp/x", /starts with "-": ssh would read it as an option \(option injection/],
    ["alice@-oProxyCommand=x", /host "-oProxyCommand=x" .* starts with "-"/],
    ["-alice@gpu-b", /starts with "-"/],
    ["alice@gpu b", /contains a space or control character/],
    ["alice@gpu-b\t", /contains a space or control character/],
    ["ssh://alice@gpu-b:2222", /is a URI; write \[user@\]host and put the port in ssh.port/],
    ["alice@gpu-b:2222", /carries a port; .*ssh.port/],
    ["alice@[fd00::1]", /write an IPv6 address bare/],
    ["al!ce@gpu-b", /user "al!ce" .* is not a user name/],
    ["alice@gpu/b", /host "gpu\/b" .* is not a host name or address/],
    ["a@b@gpu-b", /user "a@b" .* is not a user name/],
    ["fe80::1%eth0", /link-local address with a zone/],
  ])("refuses %j, naming the node and the fix", async (destination, message) => {
    const issues = await issuesOf((t) => {
      nodes(t)[0]!["ssh"] = { destination };
    });
    expect(issues).toEqual([
      expect.objectContaining({
        file: "fleet.json",
        path: "$.nodes[0].ssh.destination",
        rule: "node-ssh-destination",
        message: expect.stringMatching(new RegExp(`^node gpu-a: .*${message.source}`)),
      }),
    ]);
  });

  it.each(["alice@gpu-b.example.org", "10.20.0.12", "narwhal@fd00::12", "::1", "gpu_b", "a.b-c_d@GPU-B"])(
    "accepts %j",
    async (destination) => {
      expect(
        await issuesOf((t) => {
          nodes(t)[0]!["ssh"] = { destination, port: 2222 };
        }),
      ).toEqual([]);
    },
  );

  it("the ssh block is strict: a misspelt key gets did-you-mean, a missing destination says what it is, ports are 1-65535", async () => {
    const issues = await issuesOf((t) => {
      nodes(t)[0]!["ssh"] = { destinaton: "alice@gpu-b", port: 0 };
    });
    expect(issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          path: "$.nodes[0].ssh.destinaton",
          message: expect.stringMatching(/unknown field "destinaton"; did you mean "destination"\?/),
        }),
        expect.objectContaining({
          path: "$.nodes[0].ssh.destination",
          message: expect.stringMatching(/required field "destination" is missing \(a string\): \[user@\]host/),
        }),
        expect.objectContaining({
          path: "$.nodes[0].ssh.port",
          message: expect.stringMatching(/must be a TCP port from 1 to 65535/),
        }),
      ]),
    );
    const high = await issuesOf((t) => {
      nodes(t)[0]!["ssh"] = { destination: "gpu-b", port: 65536 };
    });
    expect(high).toEqual([expect.objectContaining({ path: "$.nodes[0].ssh.port", rule: "schema" })]);
  });
});

describe("node-ssh-files", () => {
  const withFiles = (ssh: Record<string, string>) => {
    const t = validTree();
    nodes(t)[0]!["ssh"] = { destination: "alice@gpu-b", ...ssh };
    return t;
  };

  it("accepts a 0600 key and a 0644 known_hosts, relative to the desired directory", async () => {
    const { issues } = await issuesWithFiles(
      withFiles({ identity_file: "ssh/id_ed25519", known_hosts_file: "ssh/known_hosts" }),
      { "ssh/id_ed25519": 0o600, "ssh/known_hosts": 0o644 },
    );
    expect(issues).toEqual([]);
  });

  it("refuses a key readable by group or others, as OpenSSH would, with the chmod that fixes it", async () => {
    const { dir, issues } = await issuesWithFiles(withFiles({ identity_file: "id_rsa" }), { id_rsa: 0o640 });
    expect(issues).toEqual([
      expect.objectContaining({
        file: "fleet.json",
        path: "$.nodes[0].ssh.identity_file",
        rule: "node-ssh-files",
        message: `node gpu-a: ssh identity file ${join(dir, "id_rsa")} has mode 0640, readable by group or others: OpenSSH refuses such a key; chmod 600 ${join(dir, "id_rsa")}`,
      }),
    ]);
  });

  it("refuses missing files and directories, naming the resolved path", async () => {
    const tree = withFiles({ identity_file: "keys/none", known_hosts_file: "hosts.d" });
    const { dir, issues } = await issuesWithFiles(tree, { "hosts.d/x": 0o644 });
    expect(only(issues, "node-ssh-files")).toEqual([
      expect.objectContaining({
        path: "$.nodes[0].ssh.identity_file",
        message: expect.stringContaining(`${join(dir, "keys/none")} does not exist; create it or correct the path`),
      }),
      expect.objectContaining({
        path: "$.nodes[0].ssh.known_hosts_file",
        message: expect.stringContaining(`ssh known_hosts file ${join(dir, "hosts.d")} is not a regular file`),
      }),
    ]);
    expect(issues).toHaveLength(2);
  });

  it("an absolute path is taken as it is", async () => {
    const { dir } = await issuesWithFiles(validTree(), { id: 0o600 });
    const tree = withFiles({ identity_file: join(dir, "id") });
    expect((await issuesWithFiles(tree)).issues).toEqual([]);
  });
});

describe("node-work-dir", () => {
  it.each([
    ["runs", /is not absolute; write an absolute path on the node such as \/var\/lib\/narwhal\/runs/],
    ["/", /is the root directory/],
    ["/srv/..", /is the root directory/],
    ["/srv/runs\n", /contains a control character/],
  ])("refuses %j", async (workDir, message) => {
    const issues = await issuesOf((t) => {
      nodes(t)[0]!["work_dir"] = workDir;
    });
    expect(issues).toEqual([
      expect.objectContaining({
        file: "fleet.json",
        path: "$.nodes[0].work_dir",
        rule: "node-work-dir",
        message: expect.stringMatching(message),
      }),
    ]);
  });
});

describe("nodes reaching one host are one host", () => {
  const sameHost = (a: Obj, b: Obj) => {
    const t = twoNodeTree();
    nodes(t)[0]!["ssh"] = a;
    nodes(t)[1]!["ssh"] = b;
    rec(t, 2)["gpu_ids"] = ["0"];
    rec(t, 2)["accelerator_devices"] = ["/dev/nvidia0"];
    t.env["NARWHAL_NODE_2_NIXL_PORT"] = "5600";
    return t;
  };
  /** One host: engine-2 at engine-1's address, as on one machine. */
  const oneHost = (a: Obj, b: Obj) => {
    const t = sameHost(a, b);
    t.env["NARWHAL_NODE_2_IP"] = "10.0.0.11";
    return t;
  };

  it("GPUs and ports are shared by nodes with the same destination host and port (user and case aside)", async () => {
    const { issues } = await issuesWithFiles(
      oneHost({ destination: "alice@GPU-X" }, { destination: "bob@gpu-x", port: 22 }),
    );
    const host = "nodes gpu-a, gpu-b (one host: ssh gpu-x port 22)";
    expect(only(issues, "gpu-ids-disjoint-per-host")).toEqual([
      expect.objectContaining({
        path: '$.engines["engine-2"].gpu_ids[0]',
        message: expect.stringContaining(`GPU "0" on ${host} is already allocated to engine-1`),
      }),
    ]);
    // Two records of one host may share its address (before, "belongs to node gpu-a").
    expect(only(issues, "host-consistency")).toEqual([]);
    expect(only(issues, "ports-unique-per-host")).toEqual([
      expect.objectContaining({
        path: "$.NARWHAL_NODE_2_NIXL_PORT",
        message: expect.stringContaining(`port 5600 on ${host} is already planned for engine-1`),
      }),
    ]);
  });

  it("another port or another host is another host", async () => {
    const pairs: [Obj, Obj][] = [
      [{ destination: "gpu-x" }, { destination: "gpu-x", port: 2222 }],
      [{ destination: "gpu-x" }, { destination: "gpu-y" }],
    ];
    for (const [a, b] of pairs) expect((await issuesWithFiles(sameHost(a, b))).issues).toEqual([]);
  });
});
