// Corpus trees about where a node is (issue 10 item 2): its ssh block, the
// key files the controller logs in with, its work_dir, and two node records
// naming one host. Each breaks one thing of a valid tree, like corpus.ts.
import { chmod, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { rec, type DesiredTree, type Obj } from "../desired/fixtures.js";
import { F, L, node0, r2, type CorpusCase } from "./corpus-case.js";

const ssh = (t: DesiredTree, block: Obj) => {
  node0(t)["ssh"] = block;
};
/** A file of `mode` at `rel` inside the desired directory. */
const file = (rel: string, mode: number) => async (dir: string) => {
  await mkdir(join(dir, rel, ".."), { recursive: true });
  await writeFile(join(dir, rel), "-----BEGIN OPENSSH PRIVATE KEY-----\n");
  await chmod(join(dir, rel), mode);
};

export const NODE_CASES: CorpusCase[] = [
  {
    name: "ssh destination is an ssh option (-oProxyCommand=...)",
    category: "node ssh",
    edit: (t) => ssh(t, { destination: "-oProxyCommand=touch /tmp/pwned" }),
    expect: [{ file: F, path: "$.nodes[0].ssh.destination", message: /ssh would read it as an option/ }],
  },
  {
    name: "ssh destination with a space",
    category: "node ssh",
    edit: (t) => ssh(t, { destination: "alice@gpu-b -v" }),
    expect: [{ file: F, path: "$.nodes[0].ssh.destination", message: /contains a space or control character/ }],
  },
  {
    name: "ssh destination carries the port",
    category: "node ssh",
    edit: (t) => ssh(t, { destination: "alice@gpu-b:2222" }),
    expect: [{ file: F, path: "$.nodes[0].ssh.destination", message: /put the port in ssh.port/ }],
  },
  {
    name: "ssh port out of range",
    category: "node ssh",
    edit: (t) => ssh(t, { destination: "alice@gpu-b", port: 70000 }),
    expect: [{ file: F, path: "$.nodes[0].ssh.port", message: /must be a TCP port from 1 to 65535/ }],
  },
  {
    name: "ssh block key misspelt",
    category: "node ssh",
    edit: (t) => ssh(t, { destination: "alice@gpu-b", identityfile: "id_ed25519" }),
    expect: [{ file: F, path: "$.nodes[0].ssh.identityfile", message: /did you mean "identity_file"\?/ }],
  },
  {
    name: "ssh block without a destination",
    category: "node ssh",
    edit: (t) => ssh(t, { port: 22 }),
    expect: [{ file: F, path: "$.nodes[0].ssh.destination", message: /required field "destination" is missing/ }],
  },
  {
    name: "ssh identity file missing",
    category: "node ssh files",
    edit: (t) => ssh(t, { destination: "alice@gpu-b", identity_file: "keys/id_ed25519" }),
    expect: [{ file: F, path: "$.nodes[0].ssh.identity_file", message: /keys\/id_ed25519 does not exist/ }],
  },
  {
    name: "ssh identity file readable by others",
    category: "node ssh files",
    edit: (t) => ssh(t, { destination: "alice@gpu-b", identity_file: "id_ed25519" }),
    after: file("id_ed25519", 0o644),
    expect: [
      { file: F, path: "$.nodes[0].ssh.identity_file", message: /mode 0644, .*OpenSSH refuses such a key; chmod 600/ },
    ],
  },
  {
    name: "ssh known_hosts file is a directory",
    category: "node ssh files",
    edit: (t) => ssh(t, { destination: "alice@gpu-b", known_hosts_file: "known_hosts" }),
    after: file("known_hosts/x", 0o644),
    expect: [{ file: F, path: "$.nodes[0].ssh.known_hosts_file", message: /known_hosts is not a regular file/ }],
  },
  {
    name: "work_dir relative",
    category: "node work_dir",
    edit: (t) => {
      node0(t)["work_dir"] = "runs";
    },
    expect: [{ file: F, path: "$.nodes[0].work_dir", message: /is not absolute/ }],
  },
  {
    name: "work_dir is the root directory",
    category: "node work_dir",
    edit: (t) => {
      node0(t)["work_dir"] = "/var/..";
    },
    expect: [{ file: F, path: "$.nodes[0].work_dir", message: /is the root directory/ }],
  },
  {
    name: "two node records for one ssh host share its GPUs",
    category: "duplicate GPU",
    edit: (t) => {
      const nodes = t.fleet["nodes"] as Obj[];
      const n2 = node0(t)["engines"] as string[];
      node0(t)["engines"] = n2.filter((e) => e !== "n2");
      ssh(t, { destination: "root@gpu-x" });
      nodes.push({ name: "gpu-x-again", engines: ["n2"], ssh: { destination: "narwhal@gpu-x", port: 22 } });
      rec(t, 2)["gpu_ids"] = [...(rec(t, 1)["gpu_ids"] as string[])];
    },
    expect: {
      file: L,
      path: r2(".gpu_ids[0]"),
      message: /on nodes \S+, gpu-x-again \(one host: ssh gpu-x port 22\) is already allocated/,
    },
  },
];
