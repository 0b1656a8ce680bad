// Planned-listener check (seed 000: "Any existing listener on planned HTTP,
// attestation, NIXL side-channel, or transfer ports blocks launch until
// ownership is resolved"), on the engine's own node. Two readings, either of
// which blocks: the node's listener table (`ss -Hltn`, as the seed's `ss -ltnp`)
// and a bind test there. The bind is the kernel's authoritative answer (it also
// catches a planned address the node does not carry); ss sees a listener the
// bind could miss (one bound with SO_REUSEPORT, or in a way a wildcard bind does not collide with).

import net from "node:net";
import { NarwhalError } from "../../errors.js";
import type { EngineSpec } from "../../desired/types.js";
import type { HostAccess } from "../../hosts/types.js";
import { BIND_TEST_PY } from "./bind-test.js";
import { runHelper } from "../../hosts/stdlib-python.js";

export interface PlannedPort {
  port: number;
  /** "http", "attestation", "nixl side channel", "transfer". */
  purpose: string;
  /** The engine-spec field that planned it, for error messages. */
  input: string;
}

export interface PortCheck {
  port: number;
  purpose: string;
  free: boolean;
}

/** Every port the engine will listen on, in the seed's order. */
export function plannedPorts(spec: EngineSpec): PlannedPort[] {
  return [
    { port: spec.http_port, purpose: "http", input: "http_port (engine url)" },
    { port: spec.attestation_port, purpose: "attestation", input: "attestation_port (attestation_url)" },
    { port: spec.nixl_port, purpose: "nixl side channel", input: "nixl_port (VLLM_NIXL_SIDE_CHANNEL_PORT)" },
    ...spec.transfer_ports.map((port, i) => ({ port, purpose: "transfer", input: `transfer_ports[${i}]` })),
  ];
}

/** "[fd00::1]" → "fd00::1": URL hosts keep brackets, bind() must not see them. */
export function bindHost(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

const WILDCARDS = new Set(["", "::", "0.0.0.0", "*"]);

/** What one bind attempt says: "free", or the errno name that refused it ("EADDRINUSE", "EADDRNOTAVAIL", ...). */
type BindResult = string;

/** The error a refused bind is, other than EADDRINUSE: a problem with the plan on that node, not a busy port. */
export function bindFailure(node: string, host: string, port: number, code: string): NarwhalError {
  const address = bindHost(host);
  return new NarwhalError(
    `cannot bind ${address.includes(":") ? `[${address}]` : address}:${port} (${code}) on node ${node}`,
    {
      input: `port ${port} on ${address || "*"}`,
      fix:
        code === "EADDRNOTAVAIL"
          ? `Configure ${address} on node ${node} or correct the engine URL's host.`
          : `Choose a port the engine's user may bind on node ${node}, or grant it that right.`,
      retryable: false,
    },
  );
}

/** Bind a TCP listener in this process (no SO_REUSEPORT sharing) and close it at once. */
function bindHere(host: string, port: number): Promise<BindResult> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    server.listen({ host: bindHost(host), port, exclusive: true }, () => server.close(() => resolve("free")));
  });
}

/**
 * Free on every address: a listener on any address counts, as in `ss -ltnp`.
 * The dual-stack "::" bind collides with IPv4 listeners too (checked on Linux);
 * hosts without IPv6 fall back to 0.0.0.0. A specific planned host is bound as
 * well so an address that does not exist here is caught before launch.
 * The same steps as BIND_TEST_PY runs on a remote node.
 */
async function bindEverywhereHere(host: string, port: number): Promise<BindResult> {
  let wildcard = await bindHere("::", port);
  if (wildcard === "EAFNOSUPPORT" || wildcard === "EADDRNOTAVAIL") wildcard = await bindHere("0.0.0.0", port);
  if (wildcard !== "free" || WILDCARDS.has(bindHost(host))) return wildcard;
  return bindHere(host, port);
}

/** The bind test in the controller's own process: true when host:port is free; a refusal other than EADDRINUSE throws. */
export async function portFree(host: string, port: number): Promise<boolean> {
  return verdict("local", host, port, await bindHere(host, port));
}

/** portFree on every address (bindEverywhereHere). */
export async function portFreeEverywhere(host: string, port: number): Promise<boolean> {
  return verdict("local", host, port, await bindEverywhereHere(host, port));
}

function verdict(node: string, host: string, port: number, r: BindResult): boolean {
  if (r === "free") return true;
  if (r === "EADDRINUSE") return false;
  throw bindFailure(node, host, port, r);
}

/**
 * The bind test on the node: in this process for the local host; on a remote
 * node one python3 process binds every port in turn (python3 is on every engine
 * host) and prints "<port> <free|ERRNO>" per port.
 */
async function bindTest(
  access: HostAccess,
  host: string,
  ports: number[],
  signal?: AbortSignal,
): Promise<BindResult[]> {
  if (access.kind === "local") {
    // One at a time: binding two at once could collide with itself on duplicates.
    const results: BindResult[] = [];
    for (const port of ports) results.push(await bindEverywhereHere(host, port));
    return results;
  }
  if (ports.length === 0) return [];
  const r = await runHelper(access, ["-c", BIND_TEST_PY, bindHost(host), ...ports.map(String)], {
    timeoutMs: 30_000,
    ...(signal ? { signal } : {}),
  });
  const said = new Map<string, string>();
  for (const line of r.stdout.split("\n")) {
    const [port, result] = line.trim().split(" ");
    if (port && result) said.set(port, result);
  }
  if (r.code !== 0 || ports.some((p) => !said.has(String(p)))) {
    throw new NarwhalError(
      `the bind test on node ${access.node} failed (exit ${r.code ?? r.signal}): ${r.stderr.trim().split("\n").slice(-3).join(" | ")}`,
      {
        input: `node ${access.node}`,
        fix:
          r.code === 127
            ? `Install python3 on node ${access.node}.`
            : `Run python3 on node ${access.node} by hand to see why it fails.`,
        retryable: r.timedOut,
      },
    );
  }
  return ports.map((p) => said.get(String(p))!);
}

export type PlannedPortCheck = PortCheck & { input: string; error?: NarwhalError };

/**
 * Check the planned ports on the engine's node (`access`): a port is busy when
 * the node lists a listener on it (any address) or the bind test says
 * EADDRINUSE. `ignore`: ports held by the engine's own previous process.
 * Failing to read the listener table or to run the bind test at all throws.
 */
export async function checkPlannedPorts(
  access: HostAccess,
  host: string,
  ports: PlannedPort[],
  ignore: ReadonlySet<number> = new Set(),
  signal?: AbortSignal,
): Promise<PlannedPortCheck[]> {
  const tested = ports.filter((p) => !ignore.has(p.port));
  const listening = new Set((await access.listeners()).map((l) => l.port));
  const binds = await bindTest(
    access,
    host,
    tested.map((p) => p.port),
    signal,
  );
  return ports.map((planned): PlannedPortCheck => {
    const i = tested.indexOf(planned);
    // Held by the engine's own previous process: the caller vouches for it.
    if (i < 0) return { ...planned, free: true };
    const bind = binds[i]!;
    if (bind !== "free" && bind !== "EADDRINUSE")
      return { ...planned, free: false, error: bindFailure(access.node, host, planned.port, bind) };
    return { ...planned, free: bind === "free" && !listening.has(planned.port) };
  });
}
