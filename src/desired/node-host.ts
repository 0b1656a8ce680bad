// Where a node is: the local host (no ssh block) or the host an OpenSSH
// destination names. Shared by the rules (destination syntax, one host per
// destination) and spec.ts (the Docker endpoint a node's engines default to),
// so both read a destination the same way.

import type { FleetNode } from "./schemas.js";

/** Default per-node directory for run files (issue 10 item 3). */
export const DEFAULT_WORK_DIR = "/var/lib/narwhal/runs";
export const DEFAULT_SSH_PORT = 22;

export interface Destination {
  user?: string;
  /** Host name or address, IPv6 without brackets. */
  host: string;
}

// A POSIX-portable user name and a host name, IPv4 or (bare) IPv6 address.
// Neither may start with "-": ssh would read the destination as an option.
const USER = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;
const HOST_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;
const IPV6 = /^[0-9A-Fa-f]*:[0-9A-Fa-f:.]*$/;

/** Parse `[user@]host`; a string is what is wrong with it, with the fix. */
export function parseDestination(text: string): Destination | string {
  if (text.startsWith("-"))
    return `"${text}" starts with "-": ssh would read it as an option (option injection, e.g. -oProxyCommand=...); write [user@]host`;
  if (/[\s\x00-\x1f\x7f]/.test(text)) return `"${text}" contains a space or control character; write [user@]host`;
  if (/^ssh:\/\//i.test(text))
    return `"${text}" is a URI; write [user@]host and put the port in ssh.port (default ${DEFAULT_SSH_PORT})`;
  const at = text.lastIndexOf("@");
  const user = at < 0 ? undefined : text.slice(0, at);
  const host = text.slice(at + 1);
  if (user !== undefined && !USER.test(user))
    return `user "${user}" in "${text}" is not a user name (letters, digits, . _ -, not starting with "-"); write [user@]host`;
  if (/^[^:]+:[0-9]+$/.test(host))
    return `"${text}" carries a port; write [user@]host and put the port in ssh.port (default ${DEFAULT_SSH_PORT})`;
  if (host.startsWith("[") && host.endsWith("]"))
    return `"${text}" puts the address in brackets; write an IPv6 address bare, e.g. user@fd00::1`;
  if (host.includes("%"))
    return `"${text}" names a link-local address with a zone, which a Docker ssh:// endpoint cannot carry; use a routable address or a host name`;
  if (host.startsWith("-"))
    return `host "${host}" in "${text}" starts with "-": ssh would read it as an option; write [user@]host`;
  if (!HOST_NAME.test(host) && !IPV6.test(host))
    return `host "${host}" in "${text}" is not a host name or address (letters, digits, . _ -, or an IPv6 address); write [user@]host`;
  return user === undefined ? { host } : { user, host };
}

/**
 * Which host a node's engines run on, as a key: nodes with equal keys are one
 * host and share its GPUs and ports. The user is left out (alice@h and bob@h
 * reach one machine) and the host name compared case-insensitively; two names
 * or addresses for one machine cannot be told apart here.
 */
export function hostKeyOf(node: FleetNode): string {
  if (!node.ssh) return `local node ${node.name}`;
  const d = parseDestination(node.ssh.destination);
  const host = typeof d === "string" ? node.ssh.destination : d.host;
  return `ssh ${host.toLowerCase()} port ${node.ssh.port}`;
}

/** `ssh://[user@]host[:port]`: the Docker endpoint of a node reached over ssh (port omitted when 22). */
export function sshDockerHost(ssh: { destination: string; port: number }): string {
  const d = parseDestination(ssh.destination);
  if (typeof d === "string") throw new Error(`internal: ssh destination passed validation but does not parse: ${d}`);
  const host = d.host.includes(":") ? `[${d.host}]` : d.host;
  const port = ssh.port === DEFAULT_SSH_PORT ? "" : `:${ssh.port}`;
  return `ssh://${d.user === undefined ? "" : `${d.user}@`}${host}${port}`;
}
