// Rules about where engines listen: URL form, URLs against the node variables,
// one address per node, and one listener per port on a host (HTTP,
// attestation, NIXL side channel, transfer ports).

import type { ValidationIssue } from "../errors.js";
import { byHost, indexOfIid, nixlPortOf, transferPortsOf } from "./engine-pairs.js";
import { FLEET_FILE, fleetIssue, type FleetRule } from "./rule-context.js";
import { ENV_FILE } from "./rules-variables.js";
import { jsonPath } from "./schemas.js";
import { nodeVar, parseEndpoint } from "./urls.js";

const isLoopback = (host: string) => host === "localhost" || host === "::1" || host.startsWith("127.");

export const addressRules: FleetRule[] = [
  {
    name: "url-format",
    needs: "fleet",
    check: ({ fleet }) =>
      fleet.engines.flatMap((e, i) => {
        const out: ValidationIssue[] = [];
        if (e === undefined) return out;
        const url = parseEndpoint(e.url);
        if (typeof url === "string") out.push(fleetIssue("url-format", ["engines", i, "url"], url));
        else if (url.path !== "/")
          out.push(
            fleetIssue(
              "url-format",
              ["engines", i, "url"],
              `"${e.url}" must not have a path; the engine serves at its root`,
            ),
          );
        const att = parseEndpoint(e.attestation_url);
        if (typeof att === "string") out.push(fleetIssue("url-format", ["engines", i, "attestation_url"], att));
        return out;
      }),
  },
  {
    name: "url-matches-variables",
    needs: "fleet",
    check: ({ fleet, vars }) =>
      fleet.engines.flatMap((e, i) => {
        if (e === undefined) return [];
        const k = indexOfIid(e.iid);
        if (k === undefined) return [];
        return (["url", "attestation_url"] as const).flatMap((field) => {
          const v = nodeVar(k, field === "url" ? "URL" : "ATTESTATION_URL");
          const want = vars[v];
          return want === undefined || want === e[field]
            ? []
            : [
                fleetIssue(
                  "url-matches-variables",
                  ["engines", i, field],
                  `"${e[field]}" differs from ${v}="${want}" that deployment.env gives engine ${k}; write "\${${v}}" or fix the node variables`,
                ),
              ];
        });
      }),
  },
  {
    name: "host-consistency",
    needs: "both",
    check: ({ pairs: paired }) => {
      const out: ValidationIssue[] = [];
      const hostOwner = new Map<string, string>();
      for (const [host, pairs] of byHost(paired)) {
        const addresses = new Set<string>();
        for (const p of pairs) {
          const url = parseEndpoint(p.fleet.url);
          if (typeof url === "string") continue;
          addresses.add(url.host);
          const other = hostOwner.get(url.host);
          if (other !== undefined && other !== host && !isLoopback(url.host)) {
            out.push(
              fleetIssue(
                "host-consistency",
                ["engines", p.fleetIndex, "url"],
                `${p.iid} on ${host} uses address ${url.host}, which belongs to ${other}; engines sharing an address share a host`,
              ),
            );
          }
          hostOwner.set(url.host, host);
          if (addresses.size > 1) {
            out.push(
              fleetIssue(
                "host-consistency",
                ["engines", p.fleetIndex, "url"],
                `${p.iid} uses host ${url.host} but other engines on ${host} use ${[...addresses][0]}; one host has one engine address`,
              ),
            );
          }
        }
      }
      return out;
    },
  },
  {
    name: "ports-unique-per-host",
    needs: "both",
    check: ({ vars, pairs: paired }) => {
      const out: ValidationIssue[] = [];
      for (const [host, pairs] of byHost(paired)) {
        const taken = new Map<number, string>();
        const claim = (port: number | undefined, what: string, file: string, path: string) => {
          if (port === undefined) return;
          const other = taken.get(port);
          if (other !== undefined) {
            out.push({
              file,
              path,
              rule: "ports-unique-per-host",
              message: `${what} port ${port} on ${host} is already planned for ${other}; give each listener its own port`,
            });
          } else taken.set(port, what);
        };
        for (const p of pairs) {
          const http = parseEndpoint(p.fleet.url);
          const att = parseEndpoint(p.fleet.attestation_url);
          const base = ["engines", p.fleetIndex];
          claim(
            typeof http === "string" ? undefined : http.port,
            `${p.name} HTTP`,
            FLEET_FILE,
            jsonPath([...base, "url"]),
          );
          claim(
            typeof att === "string" ? undefined : att.port,
            `${p.name} attestation`,
            FLEET_FILE,
            jsonPath([...base, "attestation_url"]),
          );
          const nixl = nixlPortOf(vars, p.k);
          // Reported at the per-node variable: that is the one to set to resolve it.
          claim(
            nixl.port,
            `${p.name} NIXL side-channel (${nixl.variable})`,
            ENV_FILE,
            `$.${nodeVar(p.k, "NIXL_PORT")}`,
          );
          const transfer = transferPortsOf(vars, p.k);
          transfer.ports.forEach((port) =>
            claim(port, `${p.name} transfer (${transfer.variable})`, ENV_FILE, `$.${nodeVar(p.k, "TRANSFER_PORTS")}`),
          );
        }
      }
      return out;
    },
  },
];
