// seed 003 §14: engine and attestation URLs derived from node variables.
//   NARWHAL_NODE_<k>_URL             = http://<NARWHAL_NODE_<k>_IP>:<engine port>
//   NARWHAL_NODE_<k>_ATTESTATION_URL = http://<ip>:<attest port>/v1/attestation
// with per-node port overrides falling back to the fleet-wide ones, and IPv6
// literals bracketed. An explicitly set URL variable wins; then host and port
// come from parsing it. The derived variables are added before substitution so
// fleet.json can say "url": "${NARWHAL_NODE_1_URL}".

import { isIP, isIPv4 } from "node:net";

export const DEFAULT_NIXL_PORT = 5600;

export const nodeVar = (k: number, suffix: string): string => `NARWHAL_NODE_${k}_${suffix}`;

export interface DerivedEndpoints {
  /** Derived URL variables (only those not explicitly set). */
  derived: Record<string, string>;
  /** Why a URL variable could not be derived, for "undefined variable" messages. */
  unavailable: Map<string, string>;
}

/** The value of a per-node override, else the fleet-wide variable. */
export function perNode(
  vars: Readonly<Record<string, string>>,
  k: number,
  suffix: string,
  global: string,
): string | undefined {
  const own = nodeVar(k, suffix);
  if (Object.hasOwn(vars, own)) return vars[own];
  return Object.hasOwn(vars, global) ? vars[global] : undefined;
}

/** Name of the variable perNode() took its value from (for messages). */
export function perNodeSource(
  vars: Readonly<Record<string, string>>,
  k: number,
  suffix: string,
  global: string,
): string {
  return Object.hasOwn(vars, nodeVar(k, suffix)) ? nodeVar(k, suffix) : global;
}

/** Parse a port variable: an integer 1..65535 written in decimal, else undefined. */
export function parsePort(value: string | undefined): number | undefined {
  if (value === undefined || !/^[0-9]{1,5}$/.test(value)) return undefined;
  const n = Number(value);
  return n >= 1 && n <= 65535 ? n : undefined;
}

/** Host part of a URL for an address: IPv6 literals bracketed, zone ids escaped. */
export function urlHost(ip: string): string {
  if (ip.startsWith("[")) return ip;
  return ip.includes(":") ? `[${ip.replace(/%(?!25)/, "%25")}]` : ip;
}

/** Derive NARWHAL_NODE_<k>_URL and _ATTESTATION_URL for every engine index k. */
export function deriveEndpoints(vars: Readonly<Record<string, string>>, indices: Iterable<number>): DerivedEndpoints {
  const derived: Record<string, string> = {};
  const unavailable = new Map<string, string>();
  for (const k of indices) {
    const ipVar = nodeVar(k, "IP");
    const ip = Object.hasOwn(vars, ipVar) ? vars[ipVar] : undefined;
    const targets: Array<[string, string, string, string]> = [
      [nodeVar(k, "URL"), "ENGINE_PORT", "NARWHAL_ENGINE_PORT", ""],
      [nodeVar(k, "ATTESTATION_URL"), "ATTEST_PORT", "NARWHAL_ATTEST_PORT", "/v1/attestation"],
    ];
    for (const [name, portSuffix, portGlobal, path] of targets) {
      if (Object.hasOwn(vars, name)) continue; // explicit URL overrides derivation
      const portName = perNodeSource(vars, k, portSuffix, portGlobal);
      const portText = perNode(vars, k, portSuffix, portGlobal);
      const port = parsePort(portText);
      if (ip === undefined || ip === "") {
        unavailable.set(name, `it is derived from ${ipVar}, which is not set; set ${ipVar} or ${name}`);
      } else if (!isIpAddress(ip)) {
        unavailable.set(
          name,
          `it is derived from ${ipVar}=${JSON.stringify(ip)}, which is not an IP address; write the node's IPv4 or IPv6 address, without port`,
        );
      } else if (portText === undefined) {
        unavailable.set(name, `it is derived from ${portName}, which is not set`);
      } else if (port === undefined) {
        unavailable.set(name, `it is derived from ${portName}="${portText}", which is not a port 1..65535`);
      } else {
        derived[name] = `http://${urlHost(ip)}:${port}${path}`;
      }
    }
  }
  return { derived, unavailable };
}

export interface Endpoint {
  scheme: "http" | "https";
  /** Host without IPv6 brackets (what vLLM's --host and NIXL take). */
  host: string;
  port: number;
  path: string;
}

/** An IPv4 address in dotted-quad form or an IPv6 address (optionally bracketed), as seed 003 §14 writes NARWHAL_NODE_<k>_IP. */
export function isIpAddress(value: string): boolean {
  if (value.startsWith("[") && value.endsWith("]")) return isIP(value.slice(1, -1)) === 6;
  return isIP(value) !== 0;
}

/** The host exactly as written in a URL (before the WHATWG parser normalises it). */
function writtenHost(url: string): string | undefined {
  return /^[A-Za-z][A-Za-z0-9+.-]*:\/\/(?:[^@/?#]*@)?(\[[^\]]*\]|[^:/?#]*)/.exec(url)?.[1];
}

/** parseEndpoint's answers by URL (it is pure): rules and specs parse each of 2000 URLs five times. */
const parsed = new Map<string, Endpoint | string>();
const PARSED_MAX = 10_000;

/** Parse an engine or attestation URL; a string error says what is wrong. */
export function parseEndpoint(url: string): Endpoint | string {
  let e = parsed.get(url);
  if (e === undefined) {
    if (parsed.size >= PARSED_MAX) parsed.clear();
    e = parseEndpointOnce(url);
    parsed.set(url, e);
  }
  return typeof e === "string" ? e : { ...e };
}

function parseEndpointOnce(url: string): Endpoint | string {
  // The URL parser silently drops tabs and newlines; the launcher and the shell tools would not.
  if (/[\s\x00-\x1f\x7f]/.test(url)) return `${JSON.stringify(url)} contains whitespace or control characters`;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `"${url}" is not a URL; write http://<host>:<port>`;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return `"${url}" must use http:// or https://`;
  if (u.username || u.password) return `"${url}" must not carry credentials; the API key is passed separately`;
  if (u.search || u.hash) return `"${url}" must not have a query or fragment`;
  if (!u.hostname) return `"${url}" has no host`;
  const written = writtenHost(url);
  // "10.0.3" or "0x0a.0.0.3" parse as 10.0.0.3: one engine, two spellings that other tools read differently.
  if (isIPv4(u.hostname) && written !== u.hostname) {
    return `"${url}": host "${written ?? ""}" is read as ${u.hostname}; write the address as four decimal numbers`;
  }
  const scheme = u.protocol === "https:" ? "https" : "http";
  const port = u.port === "" ? (scheme === "https" ? 443 : 80) : Number(u.port);
  const host = u.hostname.startsWith("[") ? u.hostname.slice(1, -1).replace("%25", "%") : u.hostname;
  return { scheme, host, port, path: u.pathname };
}
