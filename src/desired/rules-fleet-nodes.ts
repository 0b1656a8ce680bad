// Rules about where a node is: its ssh destination, the key and known_hosts
// files the controller logs in with, and its work_dir. Which nodes are one
// host (same destination host and port) is engine-pairs.ts byHost, used by the
// per-host GPU and port rules.

import { posix } from "node:path";
import type { ValidationIssue } from "../errors.js";
import type { NodeFiles } from "./node-files.js";
import { DEFAULT_WORK_DIR, parseDestination } from "./node-host.js";
import { fleetIssue, type FleetRule } from "./rule-context.js";
import type { FleetNode } from "./schemas.js";

/** Apply `fn` to every node record that passed its schema. */
const eachNode = (nodes: ReadonlyArray<FleetNode | undefined>, fn: (n: FleetNode, i: number) => ValidationIssue[]) =>
  nodes.flatMap((n, i) => (n === undefined ? [] : fn(n, i)));

const octal = (mode: number) => mode.toString(8).padStart(4, "0");

function fileIssues(
  node: FleetNode,
  i: number,
  field: "identity_file" | "known_hosts_file",
  files: NodeFiles | undefined,
): ValidationIssue[] {
  const value = node.ssh?.[field];
  const facts = value === undefined ? undefined : files?.get(value);
  if (value === undefined || facts === undefined) return [];
  const at = ["nodes", i, "ssh", field];
  const what = field === "identity_file" ? "ssh identity file" : "ssh known_hosts file";
  const issue = (message: string) => [fleetIssue("node-ssh-files", at, `node ${node.name}: ${what} ${message}`)];
  switch (facts.kind) {
    case "missing":
      return issue(
        `${facts.path} does not exist; create it or correct the path (relative paths start at the desired directory)`,
      );
    case "not-file":
      return issue(`${facts.path} is not a regular file; name the file itself`);
    case "unreadable":
      return issue(`${facts.path} cannot be read (${facts.code ?? "EACCES"}); let the user narwhal runs as read it`);
    case "file":
      // OpenSSH refuses a private key its owner lets others read ("UNPROTECTED PRIVATE KEY FILE") and never uses it.
      if (
        field === "identity_file" &&
        facts.ownedByController &&
        facts.mode !== undefined &&
        (facts.mode & 0o077) !== 0
      )
        return issue(
          `${facts.path} has mode ${octal(facts.mode)}, readable by group or others: OpenSSH refuses such a key; chmod 600 ${facts.path}`,
        );
      return [];
  }
}

export const nodeRules: FleetRule[] = [
  {
    name: "node-ssh-destination",
    needs: "fleet",
    check: ({ fleet }) =>
      eachNode(fleet.nodes, (n, i) => {
        if (!n.ssh) return [];
        const d = parseDestination(n.ssh.destination);
        return typeof d === "string"
          ? [fleetIssue("node-ssh-destination", ["nodes", i, "ssh", "destination"], `node ${n.name}: ${d}`)]
          : [];
      }),
  },
  {
    name: "node-ssh-files",
    needs: "fleet",
    check: ({ fleet, nodeFiles }) =>
      eachNode(fleet.nodes, (n, i) => [
        ...fileIssues(n, i, "identity_file", nodeFiles),
        ...fileIssues(n, i, "known_hosts_file", nodeFiles),
      ]),
  },
  {
    name: "node-work-dir",
    needs: "fleet",
    check: ({ fleet }) =>
      eachNode(fleet.nodes, (n, i) => {
        const dir = n.work_dir;
        if (dir === undefined) return [];
        const issue = (why: string) => [
          fleetIssue("node-work-dir", ["nodes", i, "work_dir"], `node ${n.name}: work_dir "${dir}" ${why}`),
        ];
        if (!dir.startsWith("/"))
          return issue(`is not absolute; write an absolute path on the node such as ${DEFAULT_WORK_DIR}`);
        if (/[\x00-\x1f\x7f]/.test(dir)) return issue("contains a control character; write a plain absolute path");
        if (posix.normalize(dir) === "/")
          return issue(
            `is the root directory: narwhal creates and prunes run directories under it; name a directory of its own such as ${DEFAULT_WORK_DIR}`,
          );
        return [];
      }),
  },
];
