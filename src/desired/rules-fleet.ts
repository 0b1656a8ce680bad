// Rules across records: fleet ↔ launch pairing, node membership, roles, and the
// GPUs engines sharing a host must not share; then where nodes are
// (rules-fleet-nodes.ts) and the addresses and listening ports of
// rules-fleet-addresses.ts, in that order.

import type { ValidationIssue } from "../errors.js";
import { byHost, indexOfEngineName, indexOfIid } from "./engine-pairs.js";
import { FLEET_FILE, LAUNCH_FILE, fleetIssue, recPath, type FleetContext, type FleetRule } from "./rule-context.js";
import { addressRules } from "./rules-fleet-addresses.js";
import { nodeRules } from "./rules-fleet-nodes.js";
import { closestName } from "./did-you-mean.js";

export type { FleetContext } from "./rule-context.js";

const membershipRules: FleetRule[] = [
  {
    // A max_unavailable for a role no engine has would silently leave the real role at the default.
    name: "rollout-roles",
    needs: "fleet",
    check: ({ fleet, failures }) => {
      if (!fleet.rollout || failures.fleetEnginesIncomplete) return [];
      const roles = [...new Set(fleet.engines.flatMap((e) => (e ? [e.role] : [])))];
      return Object.keys(fleet.rollout.max_unavailable)
        .filter((r) => !roles.includes(r))
        .map((r) => {
          const guess = closestName(r, roles);
          return fleetIssue(
            "rollout-roles",
            ["rollout", "max_unavailable", r],
            `no engine has role "${r}"${guess ? `; did you mean "${guess}"?` : ""} (roles in this fleet: ${roles.join(", ")}); name a role of the engines or remove the entry`,
          );
        });
    },
  },
  {
    name: "fleet-launch-pairing",
    needs: "both",
    check: ({ fleet, launch, failures }) => {
      // A partner that is present but failed its schema is not missing; in a list with an unreadable name it may be that one.
      const iids = new Set([...iidsOf(fleet), ...failures.fleetIids]);
      const out = failures.launchRecordsIncomplete
        ? []
        : fleet.engines.flatMap((e, i) =>
            e === undefined ||
            Object.hasOwn(launch.engines, `engine-${indexOfIid(e.iid)}`) ||
            failures.launchNames.has(`engine-${indexOfIid(e.iid)}`)
              ? []
              : [
                  fleetIssue(
                    "fleet-launch-pairing",
                    ["engines", i, "iid"],
                    `${e.iid} has no launch record engine-${indexOfIid(e.iid)} in ${LAUNCH_FILE}; add one or remove the engine`,
                  ),
                ],
          );
      for (const name of failures.fleetEnginesIncomplete ? [] : Object.keys(launch.engines)) {
        if (!iids.has(`n${indexOfEngineName(name)}`)) {
          out.push({
            file: LAUNCH_FILE,
            path: recPath(name),
            rule: "fleet-launch-pairing",
            message: `${name} has no fleet record with iid n${indexOfEngineName(name)} in ${FLEET_FILE}; add one or remove the record`,
          });
        }
      }
      return out;
    },
  },
  {
    name: "unique-names",
    needs: "fleet",
    check: ({ fleet }) => {
      const iids = firstIndexOf(fleet.engines, (e) => e.iid);
      const names = firstIndexOf(fleet.nodes, (n) => n.name);
      return [
        ...fleet.engines.flatMap((e, i) =>
          e === undefined || iids.get(e.iid) === i
            ? []
            : [fleetIssue("unique-names", ["engines", i, "iid"], `iid ${e.iid} is used by more than one engine`)],
        ),
        ...fleet.nodes.flatMap((n, i) =>
          n === undefined || names.get(n.name) === i
            ? []
            : [fleetIssue("unique-names", ["nodes", i, "name"], `node name ${n.name} is used twice`)],
        ),
      ];
    },
  },
  {
    name: "engine-on-one-node",
    needs: "fleet",
    check: ({ fleet, failures }) => {
      const out: ValidationIssue[] = [];
      const seen = new Map<string, string>();
      const known = new Set([...iidsOf(fleet), ...failures.fleetIids]);
      fleet.nodes.forEach((node, ni) =>
        node?.engines.forEach((iid, ei) => {
          const where = ["nodes", ni, "engines", ei];
          if (!known.has(iid)) {
            // An engine record whose iid cannot be read may be the one listed.
            if (!failures.fleetEnginesIncomplete)
              out.push(
                fleetIssue("engine-on-one-node", where, `node ${node.name} lists ${iid}, which is not in engines`),
              );
          } else if (seen.has(iid))
            out.push(
              fleetIssue(
                "engine-on-one-node",
                where,
                `${iid} is already on node ${seen.get(iid)}; an engine runs on exactly one node`,
              ),
            );
          else seen.set(iid, node.name);
        }),
      );
      // A node that failed its schema may be the one listing an engine: "on no node" would be a guess.
      if (!failures.nodesIncomplete)
        fleet.engines.forEach((e, i) => {
          if (e !== undefined && !seen.has(e.iid))
            out.push(
              fleetIssue(
                "engine-on-one-node",
                ["engines", i],
                `${e.iid} is on no node; list it under one node's engines`,
              ),
            );
        });
      return out;
    },
  },
  {
    name: "role-matches-fleet",
    needs: "both",
    check: ({ pairs }) =>
      pairs.flatMap((p) =>
        p.record.role === p.fleet.role
          ? []
          : [
              {
                file: LAUNCH_FILE,
                path: recPath(p.name, "role"),
                rule: "role-matches-fleet",
                message: `${p.name}: role "${p.record.role}" differs from the fleet record ${p.iid} role "${p.fleet.role}"`,
              },
            ],
      ),
  },
  {
    name: "gpu-ids-disjoint-per-host",
    needs: "both",
    check: ({ pairs: paired }) => {
      const out: ValidationIssue[] = [];
      for (const [host, pairs] of byHost(paired)) {
        const owner = new Map<string, { name: string; shared?: string }>();
        for (const p of pairs) {
          // Engines that declare the same shared_device GPU share it on purpose (start-shared checks their budget).
          const shared = p.record.shared_device?.gpu_uuid.toLowerCase();
          p.record.gpu_ids.forEach((id, i) => {
            const other = owner.get(id);
            if (other !== undefined && other.name !== p.name && !(shared !== undefined && other.shared === shared)) {
              out.push({
                file: LAUNCH_FILE,
                path: recPath(p.name, "gpu_ids", i),
                rule: "gpu-ids-disjoint-per-host",
                message: `${p.name}: GPU "${id}" on ${host} is already allocated to ${other.name}; concurrent engines need disjoint GPUs (or the same shared_device)`,
              });
            } else if (other === undefined)
              owner.set(id, { name: p.name, ...(shared === undefined ? {} : { shared }) });
          });
        }
      }
      return out;
    },
  },
];

/** The index of each key's first record (holes skipped): one pass, where findIndex per record is quadratic. */
function firstIndexOf<T>(records: ReadonlyArray<T | undefined>, key: (r: T) => string): Map<string, number> {
  const first = new Map<string, number>();
  records.forEach((r, i) => {
    if (r !== undefined && !first.has(key(r))) first.set(key(r), i);
  });
  return first;
}

export const fleetRules: FleetRule[] = [...membershipRules, ...nodeRules, ...addressRules];

/** iids of the fleet records that passed their schema. */
function iidsOf(fleet: FleetContext["fleet"]): string[] {
  return fleet.engines.flatMap((e) => (e === undefined ? [] : [e.iid]));
}
