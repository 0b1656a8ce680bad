// Rules across records: fleet ↔ launch pairing, node membership, and what
// engines sharing a host must not share (GPUs, listening ports).

import type { ValidationIssue } from "../errors.js";
import { indexOfEngineName, indexOfIid, nixlPortOf, pairEngines, transferPortsOf, type EnginePair } from "./engine-pairs.js";
import { FLEET_FILE, LAUNCH_FILE, recPath, type FullContext } from "./rules-record.js";
import { ENV_FILE } from "./rules-variables.js";
import { jsonPath } from "./schemas.js";
import { nodeVar, parseEndpoint } from "./urls.js";
import { closestName } from "./did-you-mean.js";

/** The context of a rule about fleet.json alone: it runs even when engine-launch.json cannot be read. */
export type FleetContext = Omit<FullContext, "launch">;
type FleetRule =
  | { name: string; needs: "fleet"; check(ctx: FleetContext): ValidationIssue[] }
  | { name: string; needs: "both"; check(ctx: FullContext): ValidationIssue[] };
const fleetAt = (rule: string, segments: PropertyKey[], message: string): ValidationIssue =>
  ({ file: FLEET_FILE, path: jsonPath(segments), message, rule });
const isLoopback = (host: string) => host === "localhost" || host === "::1" || host.startsWith("127.");

export const fleetRules: FleetRule[] = [
  {
    // A max_unavailable for a role no engine has would silently leave the real role at the default.
    name: "rollout-roles",
    needs: "fleet",
    check: ({ fleet, failures }) => {
      if (!fleet.rollout || failures.fleetEnginesIncomplete) return [];
      const roles = [...new Set(fleet.engines.flatMap((e) => (e ? [e.role] : [])))];
      return Object.keys(fleet.rollout.max_unavailable).filter((r) => !roles.includes(r)).map((r) => {
        const guess = closestName(r, roles);
        return fleetAt("rollout-roles", ["rollout", "max_unavailable", r],
          `no engine has role "${r}"${guess ? `; did you mean "${guess}"?` : ""} (roles in this fleet: ${roles.join(", ")}); name a role of the engines or remove the entry`);
      });
    },
  },
  {
    name: "fleet-launch-pairing",
    needs: "both",
    check: ({ fleet, launch, failures }) => {
      // A partner that is present but failed its schema is not missing; in a list with an unreadable name it may be that one.
      const iids = new Set([...iidsOf(fleet), ...failures.fleetIids]);
      const out = failures.launchRecordsIncomplete ? [] : fleet.engines.flatMap((e, i) => e === undefined ||
        Object.hasOwn(launch.engines, `engine-${indexOfIid(e.iid)}`) || failures.launchNames.has(`engine-${indexOfIid(e.iid)}`) ? [] : [fleetAt("fleet-launch-pairing", ["engines", i, "iid"],
          `${e.iid} has no launch record engine-${indexOfIid(e.iid)} in ${LAUNCH_FILE}; add one or remove the engine`)]);
      for (const name of failures.fleetEnginesIncomplete ? [] : Object.keys(launch.engines)) {
        if (!iids.has(`n${indexOfEngineName(name)}`)) {
          out.push({ file: LAUNCH_FILE, path: recPath(name), rule: "fleet-launch-pairing",
            message: `${name} has no fleet record with iid n${indexOfEngineName(name)} in ${FLEET_FILE}; add one or remove the record` });
        }
      }
      return out;
    },
  },
  {
    name: "unique-names",
    needs: "fleet",
    check: ({ fleet }) => [
      ...fleet.engines.flatMap((e, i) => e === undefined || fleet.engines.findIndex((o) => o?.iid === e.iid) === i ? []
        : [fleetAt("unique-names", ["engines", i, "iid"], `iid ${e.iid} is used by more than one engine`)]),
      ...fleet.nodes.flatMap((n, i) => n === undefined || fleet.nodes.findIndex((o) => o?.name === n.name) === i ? []
        : [fleetAt("unique-names", ["nodes", i, "name"], `node name ${n.name} is used twice`)]),
    ],
  },
  {
    name: "engine-on-one-node",
    needs: "fleet",
    check: ({ fleet, failures }) => {
      const out: ValidationIssue[] = [];
      const seen = new Map<string, string>();
      const known = new Set([...iidsOf(fleet), ...failures.fleetIids]);
      fleet.nodes.forEach((node, ni) => node?.engines.forEach((iid, ei) => {
        const where = ["nodes", ni, "engines", ei];
        if (!known.has(iid)) {
          // An engine record whose iid cannot be read may be the one listed.
          if (!failures.fleetEnginesIncomplete) out.push(fleetAt("engine-on-one-node", where, `node ${node.name} lists ${iid}, which is not in engines`));
        } else if (seen.has(iid)) out.push(fleetAt("engine-on-one-node", where, `${iid} is already on node ${seen.get(iid)}; an engine runs on exactly one node`));
        else seen.set(iid, node.name);
      }));
      // A node that failed its schema may be the one listing an engine: "on no node" would be a guess.
      if (!failures.nodesIncomplete) fleet.engines.forEach((e, i) => {
        if (e !== undefined && !seen.has(e.iid)) out.push(fleetAt("engine-on-one-node", ["engines", i], `${e.iid} is on no node; list it under one node's engines`));
      });
      return out;
    },
  },
  {
    name: "role-matches-fleet",
    needs: "both",
    check: ({ fleet, launch }) => pairEngines(fleet, launch).flatMap((p) => p.record.role === p.fleet.role ? [] : [{
      file: LAUNCH_FILE, path: recPath(p.name, "role"), rule: "role-matches-fleet",
      message: `${p.name}: role "${p.record.role}" differs from the fleet record ${p.iid} role "${p.fleet.role}"`,
    }]),
  },
  {
    name: "gpu-ids-disjoint-per-host",
    needs: "both",
    check: ({ fleet, launch }) => {
      const out: ValidationIssue[] = [];
      for (const [node, pairs] of byNode(pairEngines(fleet, launch))) {
        const owner = new Map<string, { name: string; shared?: string }>();
        for (const p of pairs) {
          // Engines that declare the same shared_device GPU share it on purpose (start-shared checks their budget).
          const shared = p.record.shared_device?.gpu_uuid.toLowerCase();
          p.record.gpu_ids.forEach((id, i) => {
            const other = owner.get(id);
            if (other !== undefined && other.name !== p.name && !(shared !== undefined && other.shared === shared)) {
              out.push({ file: LAUNCH_FILE, path: recPath(p.name, "gpu_ids", i), rule: "gpu-ids-disjoint-per-host",
                message: `${p.name}: GPU "${id}" on node ${node} is already allocated to ${other.name}; concurrent engines need disjoint GPUs (or the same shared_device)` });
            } else if (other === undefined) owner.set(id, { name: p.name, ...(shared === undefined ? {} : { shared }) });
          });
        }
      }
      return out;
    },
  },
  {
    name: "url-format",
    needs: "fleet",
    check: ({ fleet }) => fleet.engines.flatMap((e, i) => {
      const out: ValidationIssue[] = [];
      if (e === undefined) return out;
      const url = parseEndpoint(e.url);
      if (typeof url === "string") out.push(fleetAt("url-format", ["engines", i, "url"], url));
      else if (url.path !== "/") out.push(fleetAt("url-format", ["engines", i, "url"], `"${e.url}" must not have a path; the engine serves at its root`));
      const att = parseEndpoint(e.attestation_url);
      if (typeof att === "string") out.push(fleetAt("url-format", ["engines", i, "attestation_url"], att));
      return out;
    }),
  },
  {
    name: "url-matches-variables",
    needs: "fleet",
    check: ({ fleet, vars }) => fleet.engines.flatMap((e, i) => {
      if (e === undefined) return [];
      const k = indexOfIid(e.iid);
      if (k === undefined) return [];
      return (["url", "attestation_url"] as const).flatMap((field) => {
        const v = nodeVar(k, field === "url" ? "URL" : "ATTESTATION_URL");
        const want = vars[v];
        return want === undefined || want === e[field] ? [] : [fleetAt("url-matches-variables", ["engines", i, field],
          `"${e[field]}" differs from ${v}="${want}" that deployment.env gives engine ${k}; write "\${${v}}" or fix the node variables`)];
      });
    }),
  },
  {
    name: "host-consistency",
    needs: "both",
    check: ({ fleet, launch }) => {
      const out: ValidationIssue[] = [];
      const hostOwner = new Map<string, string>();
      for (const [node, pairs] of byNode(pairEngines(fleet, launch))) {
        const hosts = new Set<string>();
        for (const p of pairs) {
          const url = parseEndpoint(p.fleet.url);
          if (typeof url === "string") continue;
          hosts.add(url.host);
          const other = hostOwner.get(url.host);
          if (other !== undefined && other !== node && !isLoopback(url.host)) {
            out.push(fleetAt("host-consistency", ["engines", p.fleetIndex, "url"],
              `${p.iid} on node ${node} uses host ${url.host}, which belongs to node ${other}; engines sharing an address share a node`));
          }
          hostOwner.set(url.host, node);
          if (hosts.size > 1) {
            out.push(fleetAt("host-consistency", ["engines", p.fleetIndex, "url"],
              `${p.iid} uses host ${url.host} but other engines on node ${node} use ${[...hosts][0]}; one node has one engine address`));
          }
        }
      }
      return out;
    },
  },
  {
    name: "ports-unique-per-host",
    needs: "both",
    check: ({ fleet, launch, vars }) => {
      const out: ValidationIssue[] = [];
      for (const [node, pairs] of byNode(pairEngines(fleet, launch))) {
        const taken = new Map<number, string>();
        const claim = (port: number | undefined, what: string, file: string, path: string) => {
          if (port === undefined) return;
          const other = taken.get(port);
          if (other !== undefined) {
            out.push({ file, path, rule: "ports-unique-per-host",
              message: `${what} port ${port} on node ${node} is already planned for ${other}; give each listener its own port` });
          } else taken.set(port, what);
        };
        for (const p of pairs) {
          const http = parseEndpoint(p.fleet.url);
          const att = parseEndpoint(p.fleet.attestation_url);
          const base = ["engines", p.fleetIndex];
          claim(typeof http === "string" ? undefined : http.port, `${p.name} HTTP`, FLEET_FILE, jsonPath([...base, "url"]));
          claim(typeof att === "string" ? undefined : att.port, `${p.name} attestation`, FLEET_FILE, jsonPath([...base, "attestation_url"]));
          const nixl = nixlPortOf(vars, p.k);
          // Reported at the per-node variable: that is the one to set to resolve it.
          claim(nixl.port, `${p.name} NIXL side-channel (${nixl.variable})`, ENV_FILE, `$.${nodeVar(p.k, "NIXL_PORT")}`);
          const transfer = transferPortsOf(vars, p.k);
          transfer.ports.forEach((port) =>
            claim(port, `${p.name} transfer (${transfer.variable})`, ENV_FILE, `$.${nodeVar(p.k, "TRANSFER_PORTS")}`));
        }
      }
      return out;
    },
  },
];

/** iids of the fleet records that passed their schema. */
function iidsOf(fleet: FleetContext["fleet"]): string[] {
  return fleet.engines.flatMap((e) => (e === undefined ? [] : [e.iid]));
}

function byNode(pairs: EnginePair[]): Map<string, EnginePair[]> {
  const m = new Map<string, EnginePair[]>();
  for (const p of pairs) {
    if (!p.node) continue;
    m.set(p.node.name, [...(m.get(p.node.name) ?? []), p]);
  }
  return m;
}
