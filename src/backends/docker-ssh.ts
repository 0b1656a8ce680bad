// A `ssh://` Docker endpoint, dialled through the operator's OpenSSH client
// rather than dockerode's built-in ssh2 transport: each HTTP connection is one
// `docker system dial-stdio` on the node (what the docker CLI's own ssh://
// transport runs), over the node's ControlMaster, so the node's identity file,
// known_hosts, strict host keys and ssh_config apply, a refused or unreachable
// node is the same typed error every other step on it meets, and a master
// that died (node reboot) is simply dialled anew by the next connection.
import type http from "node:http";
import { createRequire } from "node:module";
import type { Duplex } from "node:stream";
import { NarwhalError } from "../errors.js";
import { Slots } from "../hosts/slots.js";
import type { SshHost } from "../hosts/ssh.js";

/** What runs on the node: the docker CLI relaying stdio to the node's own daemon socket. */
const DIAL_STDIO = ["docker", "system", "dial-stdio"];

/** The daemon is not answering on the node: an Error a transport failure is classified by (code). */
const NO_DAEMON = [/Cannot connect to the Docker daemon/i, /connect: no such file or directory/, /connection refused/i];

/** Why dial-stdio's exit failed the connection, or null when it ended cleanly. */
export function dialStdioFailure(
  node: string,
  endpoint: string,
  r: { code: number | null; signal: string | null; stderr: string },
): Error | null {
  if (r.code === 0) return null; // the daemon closed the connection
  const said = r.stderr.trim().split("\n").at(-1) ?? "";
  if (r.code === 127)
    return new NarwhalError(`node ${node}: the docker CLI is not on the node's PATH (${said})`, {
      retryable: false,
      input: `docker_host ${endpoint}`,
      fix: `Install the Docker CLI on node ${node} (it relays the endpoint: docker system dial-stdio), or set the node's docker_host to a tcp:// endpoint.`,
    });
  const e = new Error(`node ${node}: docker system dial-stdio exited ${r.code ?? r.signal}: ${said || "no message"}`);
  // Classified as the daemon being away (outwaited) exactly as a local socket that refuses is.
  if (NO_DAEMON.some((re) => re.test(r.stderr))) Object.assign(e, { code: "ECONNREFUSED" });
  return e;
}

// node:http is loaded by the first ssh:// endpoint's agent: a command that meets none (a local socket's
// no-op, whose reads are docker-reads.ts') never loads it.
const requireCjs = createRequire(import.meta.url);

/**
 * Connections open at once per endpoint: each is a session on the node's one master connection, and
 * sshd allows 10 of those by default (MaxSessions); the node's other steps keep room beside them.
 */
export const MAX_CONNECTIONS = 6;

/**
 * An HTTP agent whose every connection is a stream `open` makes (not a net.Socket), one per call.
 * Not kept alive: a kept connection outlives a master that dies (a node reboot) and fails the next
 * call on it; a fresh dial makes that call connect anew. The price, ~0.1 s a call (an ssh session and
 * a docker CLI start on the node), is small beside what a reconcile step waits for anyway.
 */
export function streamAgent(open: () => Promise<Duplex>): http.Agent {
  const agent = new (requireCjs("node:http") as typeof http).Agent({ keepAlive: false });
  // Node's Agent counts a socket only once it exists, so a callback-made one is limited here: a call
  // past the limit waits for a stream to close.
  const slots = new Slots(MAX_CONNECTIONS);
  const create = (_opts: unknown, done: (err: Error | null, socket?: Duplex) => void): undefined => {
    // Never rejects: both outcomes of the dial go to done, and a slot is released on either.
    void slots.acquire().then((release) =>
      open().then(
        (socket) => {
          socket.once("close", release);
          done(null, socket);
        },
        (e: unknown) => {
          release();
          done(e instanceof Error ? e : new Error(String(e)));
        },
      ),
    );
    return undefined;
  };
  // Node's Agent takes a callback-style createConnection: the socket may come later, or an error instead.
  (agent as unknown as { createConnection: typeof create }).createConnection = create;
  return agent;
}

/**
 * How a ssh:// endpoint's connections are opened: each a dial-stdio stream on the endpoint's node. `access`
 * is asked per connection, so a node whose ssh block changed is dialled with its new settings.
 */
export function dialStdio(endpoint: string, access: () => SshHost): () => Promise<Duplex> {
  return async () => {
    const host = access();
    return host.openStream(DIAL_STDIO, (r) => dialStdioFailure(host.node, endpoint, r));
  };
}
