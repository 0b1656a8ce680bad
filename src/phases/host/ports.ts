// Planned-listener check (seed 000: "Any existing listener on planned HTTP,
// attestation, NIXL side-channel, or transfer ports blocks launch until
// ownership is resolved"). Instead of parsing `ss -ltnp`, try to bind: the
// kernel's answer is the authoritative one and needs no extra tool.

import net from "node:net";
import { NarwhalError } from "../../errors.js";
import type { EngineSpec } from "../../desired/types.js";

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

/**
 * True when nothing listens on host:port. Binds a TCP listener (no
 * SO_REUSEPORT sharing) and closes it at once. EADDRINUSE means taken; other
 * failures (address not on this host, privileged port) are real problems with
 * the plan and are thrown, not reported as "busy".
 */
export function portFree(host: string, port: number): Promise<boolean> {
  const address = bindHost(host);
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EADDRINUSE") return resolve(false);
      reject(
        new NarwhalError(
          `cannot bind ${address.includes(":") ? `[${address}]` : address}:${port} (${err.code ?? err.message})`,
          {
            input: `port ${port} on ${address || "*"}`,
            fix:
              err.code === "EADDRNOTAVAIL"
                ? `Configure ${address} on this host or correct the engine URL's host.`
                : `Choose a port the engine's user may bind, or grant it that right.`,
            retryable: false,
            cause: err,
          },
        ),
      );
    });
    server.listen({ host: address, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * Free on every address: a listener on any address counts, as in `ss -ltnp`.
 * The dual-stack "::" bind collides with IPv4 listeners too (checked on Linux);
 * hosts without IPv6 fall back to 0.0.0.0. A specific planned host is bound as
 * well so an address that does not exist here is caught before launch.
 */
export async function portFreeEverywhere(host: string, port: number): Promise<boolean> {
  let wildcardFree: boolean;
  try {
    wildcardFree = await portFree("::", port);
  } catch (err) {
    const code = ((err as NarwhalError).cause as NodeJS.ErrnoException | undefined)?.code;
    if (code !== "EAFNOSUPPORT" && code !== "EADDRNOTAVAIL") throw err;
    wildcardFree = await portFree("0.0.0.0", port);
  }
  if (!wildcardFree) return false;
  const address = bindHost(host);
  return WILDCARDS.has(address) ? true : portFree(address, port);
}

/** Check the planned ports one by one (binding two at once could collide with itself on duplicates). */
export async function checkPlannedPorts(
  host: string,
  ports: PlannedPort[],
  ignore: ReadonlySet<number> = new Set(),
): Promise<Array<PortCheck & { input: string; error?: NarwhalError }>> {
  const results: Array<PortCheck & { input: string; error?: NarwhalError }> = [];
  for (const planned of ports) {
    if (ignore.has(planned.port)) {
      // Held by the engine's own previous process: the caller vouches for it.
      results.push({ ...planned, free: true });
      continue;
    }
    try {
      results.push({ ...planned, free: await portFreeEverywhere(host, planned.port) });
    } catch (err) {
      const error =
        err instanceof NarwhalError ? err : new NarwhalError(String(err), { input: planned.input, cause: err });
      results.push({ ...planned, free: false, error });
    }
  }
  return results;
}
