// What OpenSSH's exit 255 means, read from its stderr (the lines in
// test/hosts/ssh-errors.test.ts were collected from OpenSSH 9.2 itself): a node
// that cannot be reached is outwaited; a host key or a key that is refused is
// terminal, with the fix, until the operator acts.
import { HostKeyRejected, NodeAccessError, NodeAuthFailed, NodeUnreachable } from "../errors.js";

export interface SshTarget {
  node: string;
  destination: string;
  port: number;
  knownHostsFile: string;
  identityFile?: string;
}

const HOST_KEY = [
  /REMOTE HOST IDENTIFICATION HAS CHANGED/,
  /Host key verification failed/,
  /No \S+ host key is known for/,
  /Host key for \S+ has changed/,
];
const AUTH = [/Permission denied \(/, /Too many authentication failures/, /no mutual signature algorithm/];
const UNREACHABLE = [
  /Connection refused/,
  /Connection timed out/,
  /timed out during banner exchange/,
  /Connection to \S+ port \d+ timed out/,
  /No route to host/,
  /Network is unreachable/,
  /Could not resolve hostname/,
  /Name or service not known/,
  /Temporary failure in name resolution/,
  /Connection reset by/,
  /Connection closed by/,
  /closed by remote host/,
  /kex_exchange_identification/,
  /Broken pipe/,
  /Operation timed out/,
  /Timeout, server \S+ not responding/,
];

/** The most telling line of ssh's stderr: its last non-empty one, without the banner art. */
function sshSaid(stderr: string): string {
  const lines = stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !/^@+$/.test(l));
  return lines.at(-1) ?? "no message";
}

/** A NodeAccessError when ssh's stderr says the connection failed; null when it does not (a remote exit 255). */
export function classifySshFailure(stderr: string, target: SshTarget): NodeAccessError | null {
  const where = `${target.destination} port ${target.port}`;
  const said = sshSaid(stderr);
  if (HOST_KEY.some((re) => re.test(stderr))) {
    const changed = /HAS CHANGED|has changed/.test(stderr);
    const hostArg = target.port === 22 ? "HOST" : `-p ${target.port} HOST`;
    return new HostKeyRejected(
      target.node,
      target.destination,
      "host-key",
      `node ${target.node}: the host key of ${where} is ${changed ? "not the one" : "not"} recorded in ${target.knownHostsFile} (${said}); nothing was run there`,
      {
        failure: "terminal",
        input: `node ${target.node} ssh.known_hosts_file ${target.knownHostsFile}`,
        fix: `Verify the node's host key out of band (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on its console), then ${changed ? `remove the old entry (ssh-keygen -f ${target.knownHostsFile} -R HOST) and ` : ""}add it with ssh-keyscan ${hostArg} >> ${target.knownHostsFile} and compare the fingerprint.`,
      },
    );
  }
  if (AUTH.some((re) => re.test(stderr))) {
    const identity = target.identityFile ?? "the ssh agent's or ~/.ssh's default keys";
    return new NodeAuthFailed(
      target.node,
      target.destination,
      "auth",
      `node ${target.node}: ${where} refused narwhal's key (${said})`,
      {
        failure: "terminal",
        input: `node ${target.node} ssh.identity_file ${identity}`,
        fix: `Add the public key of ${identity} to the remote user's ~/.ssh/authorized_keys on ${target.destination}, or point ssh.identity_file at a key that is there.`,
      },
    );
  }
  if (UNREACHABLE.some((re) => re.test(stderr))) {
    return new NodeUnreachable(
      target.node,
      target.destination,
      "unreachable",
      `node ${target.node}: cannot reach ${where} (${said})`,
      {
        failure: "outwait",
        fix: `Check that ${target.destination} is up, sshd runs on port ${target.port} and the network between allows it; narwhal waits for the node.`,
      },
    );
  }
  return null;
}

/**
 * ssh's failure as a NodeAccessError, or null when an exit (255 included) was the remote command's own.
 * `started`: the command reported its pid, so it ran; only a recognised message (a dropped
 * connection) is ssh's then. Before that, any exit 255 is ssh's, recognised or not.
 */
export function sshConnectionError(
  r: { code: number | null; stderr: string },
  target: SshTarget,
  started: boolean,
): NodeAccessError | null {
  if (r.code !== 255) return null;
  const classified = classifySshFailure(r.stderr, target);
  if (classified || started) return classified;
  return new NodeAccessError(
    target.node,
    target.destination,
    "unreachable",
    `node ${target.node}: ssh failed (${sshSaid(r.stderr)})`,
    {
      failure: "retry",
      fix: `Run ssh -p ${target.port} ${target.destination} true by hand to see why.`,
    },
  );
}
