// How SshHost calls the OpenSSH client: the options every call shares (strict
// host keys, batch mode, one multiplexed master per node) and where the
// master's socket lives.
import { createHash } from "node:crypto";
import path from "node:path";
import { NarwhalError } from "../errors.js";

export interface SshHostOptions {
  node: string;
  /** user@host, as in the node record's ssh.destination. */
  destination: string;
  port?: number;
  identityFile?: string;
  /** Absent: ssh's own default (~/.ssh/known_hosts). */
  knownHostsFile?: string;
  /** The controller's state directory: the ControlMaster socket lives in <stateDir>/ssh (0700). */
  stateDir: string;
  connectTimeoutS?: number;
  /** Environment of the local ssh client (PATH, HOME, SSH_AUTH_SOCK): config.hostEnv. */
  clientEnv: Record<string, string>;
  /** How long a file read, stat or listing on the node may take (default FILE_OP_TIMEOUT_MS; tests shorten it). */
  fileTimeoutMs?: number;
}

/** sun_path is 108 bytes; ssh binds "<ControlPath>.<16 random chars>" first, and %C is 40 hex. */
const MAX_CONTROL_DIR = 108 - 1 - 40 - 17 - 1;

/** <stateDir>/ssh, refused when a socket path under it would not fit sun_path (ssh would fail on every call). */
export function controlDirFor(node: string, stateDir: string): string {
  const dir = path.join(stateDir, "ssh");
  if (Buffer.byteLength(dir) > MAX_CONTROL_DIR)
    throw new NarwhalError(
      `node ${node}: the SSH control socket directory ${dir} is longer than ${MAX_CONTROL_DIR} bytes (a Unix socket path holds 108)`,
      { retryable: false, input: "--state", fix: "Use a state directory with a shorter path." },
    );
  return dir;
}

/**
 * Where a node's helper interpreter lookup is kept (stdlib-python.ts HelperPythonMemo): beside the control
 * sockets, named for the node and where it is reached, so a node record pointed elsewhere looks again.
 */
export function helperPythonFile(controlDir: string, target: { node: string; destination: string; port: number }) {
  const where = `${target.node}\0${target.destination}\0${target.port}`;
  return path.join(controlDir, `helper-python-${createHash("sha256").update(where).digest("hex").slice(0, 16)}`);
}

/** Options before the destination. The operator's ssh_config still applies (Host aliases, ProxyJump). */
export function sshClientArgs(opts: SshHostOptions, controlDir: string, persistS: number): string[] {
  const o = (kv: string) => ["-o", kv];
  return [
    ...o("BatchMode=yes"),
    ...o("StrictHostKeyChecking=yes"),
    ...(opts.knownHostsFile ? o(`UserKnownHostsFile=${opts.knownHostsFile}`) : []),
    ...o("ControlMaster=auto"),
    ...o(`ControlPath=${controlDir}/%C`),
    ...o(`ControlPersist=${persistS}`),
    ...o(`ConnectTimeout=${opts.connectTimeoutS ?? 10}`),
    // A node that vanishes mid-command is noticed within 45 s rather than at the TCP timeout.
    ...o("ServerAliveInterval=15"),
    ...o("ServerAliveCountMax=3"),
    "-T",
    "-p",
    String(opts.port ?? 22),
    ...(opts.identityFile ? ["-i", opts.identityFile, ...o("IdentitiesOnly=yes")] : []),
  ];
}
