// Where watch mode's metrics listen, and reconcile's --metrics-address: parsed
// and checked before anything is read or started. No prom-client here: every
// command loads this module, only a controller with metrics on loads the rest.
import { NarwhalError } from "../errors.js";

export interface ListenAddress {
  host: string;
  port: number;
}

export const METRICS_INPUT = "--metrics-address (env NARWHAL_METRICS_ADDRESS)";

/**
 * HOST:PORT, [IPV6]:PORT, or a bare PORT (or :PORT), which listens on loopback only: metrics name
 * engines, nodes and errors, so exposing them beyond the host is the operator's explicit choice
 * (0.0.0.0:PORT). Port 0 lets the kernel choose (the log names the port it chose).
 */
export function parseListenAddress(raw: string): ListenAddress {
  const m = /^(?:(\[[0-9a-fA-F:.]+\]|[^:[\]]*):)?(\d{1,5})$/.exec(raw.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) {
    throw new NarwhalError(`metrics address ${JSON.stringify(raw)} is not HOST:PORT or PORT`, {
      input: METRICS_INPUT,
      fix: "Give a port (9464: loopback only), or HOST:PORT such as 127.0.0.1:9464, [::1]:9464 or 0.0.0.0:9464.",
    });
  }
  const host = (m[1] ?? "").replace(/^\[(.*)\]$/, "$1");
  return { host: host === "" ? "127.0.0.1" : host, port };
}

export const metricsAddressFlag = "--metrics-address <host:port>";
export const metricsAddressHelp =
  "watch mode: serve Prometheus /metrics and /healthz on HOST:PORT (a bare PORT: loopback only; env NARWHAL_METRICS_ADDRESS; default off)";

/**
 * `reconcile`'s --metrics-address, checked before any file is read: a malformed address, or one
 * given with --once (which ends before anything would scrape it), is a usage error. Returns the
 * option's address (undefined: not given; watch mode then serves on the environment's, if any).
 */
export function metricsAddressOption(opts: Record<string, unknown>): string | undefined {
  const given = opts.metricsAddress as string | undefined;
  if (given === undefined) return undefined;
  if (opts.once)
    throw new NarwhalError("--metrics-address serves watch mode only; reconcile --once exits when it converges", {
      input: "--metrics-address",
      fix: "Drop --metrics-address from reconcile --once, or drop --once to run the controller in watch mode.",
    });
  parseListenAddress(given);
  return given;
}
