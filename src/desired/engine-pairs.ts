// Joins the three desired files per engine index k: fleet record iid "n<k>",
// launch record "engine-<k>", node variables NARWHAL_NODE_<k>_*, and the node
// (host) that lists the iid. Shared by rules.ts and spec.ts so both see the
// same pairing and the same port resolution.

import type { FleetForRules } from "./records-for-rules.js";
import {
  ENGINE_NAME_PATTERN,
  IID_PATTERN,
  type EngineLaunchFile,
  type FleetEngine,
  type FleetNode,
  type ParsedLaunchRecord,
} from "./schemas.js";
import { hostKeyOf } from "./node-host.js";
import { DEFAULT_NIXL_PORT, nodeVar, parsePort, perNode, perNodeSource } from "./urls.js";

export interface EnginePair {
  k: number;
  name: string;
  iid: string;
  fleetIndex: number;
  fleet: FleetEngine;
  record: ParsedLaunchRecord;
  /** First node listing the iid (rules report engines on none or several). */
  nodeIndex?: number;
  node?: FleetNode;
}

export const indexOfIid = (iid: string): number | undefined => {
  const m = IID_PATTERN.exec(iid);
  return m ? Number(m[1]) : undefined;
};
export const indexOfEngineName = (name: string): number | undefined => {
  const m = ENGINE_NAME_PATTERN.exec(name);
  return m ? Number(m[1]) : undefined;
};

/** Engines present in both files, in index order (records that failed their schema are holes and pair with nothing). */
export function pairEngines(fleet: FleetForRules, launch: EngineLaunchFile): EnginePair[] {
  const pairs: EnginePair[] = [];
  const seen = new Set<number>();
  // The first node listing each iid, built once: a lookup per engine over every node's list is quadratic.
  const firstNode = new Map<string, number>();
  fleet.nodes.forEach((n, i) => n?.engines.forEach((iid) => firstNode.has(iid) || firstNode.set(iid, i)));
  fleet.engines.forEach((fe, fleetIndex) => {
    if (fe === undefined) return;
    const k = indexOfIid(fe.iid);
    if (k === undefined) return;
    const name = `engine-${k}`;
    if (!Object.hasOwn(launch.engines, name)) return;
    if (seen.has(k)) return; // duplicate iid: reported by a rule
    seen.add(k);
    const nodeIndex = firstNode.get(fe.iid) ?? -1;
    const node = fleet.nodes[nodeIndex];
    pairs.push({
      k,
      name,
      iid: fe.iid,
      fleetIndex,
      fleet: fe,
      record: launch.engines[name] as ParsedLaunchRecord,
      ...(node ? { nodeIndex, node } : {}),
    });
  });
  return pairs.sort((a, b) => a.k - b.k);
}

export interface PortSetting {
  port?: number;
  /** Variable the value came from, or the one to set when the default applies. */
  variable: string;
  text?: string;
}

/** VLLM_NIXL_SIDE_CHANNEL_PORT: NARWHAL_NODE_<k>_NIXL_PORT ?? NARWHAL_NIXL_PORT ?? 5600. */
export function nixlPortOf(vars: Readonly<Record<string, string>>, k: number): PortSetting {
  const text = perNode(vars, k, "NIXL_PORT", "NARWHAL_NIXL_PORT");
  if (text === undefined) return { port: DEFAULT_NIXL_PORT, variable: nodeVar(k, "NIXL_PORT") };
  const port = parsePort(text);
  return {
    ...(port === undefined ? {} : { port }),
    variable: perNodeSource(vars, k, "NIXL_PORT", "NARWHAL_NIXL_PORT"),
    text,
  };
}

/** Planned transfer ports: NARWHAL_NODE_<k>_TRANSFER_PORTS ?? NARWHAL_TRANSFER_PORTS, comma-separated. */
export function transferPortsOf(
  vars: Readonly<Record<string, string>>,
  k: number,
): { ports: number[]; variable: string; bad: string[] } {
  const text = perNode(vars, k, "TRANSFER_PORTS", "NARWHAL_TRANSFER_PORTS") ?? "";
  const variable = perNodeSource(vars, k, "TRANSFER_PORTS", "NARWHAL_TRANSFER_PORTS");
  const parts = text
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  const ports: number[] = [];
  const bad: string[] = [];
  for (const p of parts) {
    const n = parsePort(p);
    if (n === undefined) bad.push(p);
    else ports.push(n);
  }
  return { ports, variable, bad };
}

/**
 * Pairs grouped by the host they run on, keyed by how messages name it: "node
 * gpu-a", or "nodes a, b (one host: ssh h port 22)" when several node records
 * reach one host (node-host.ts hostKeyOf): their engines share its GPUs and
 * ports. Pairs on no node are left out.
 */
export function byHost(pairs: readonly EnginePair[]): Map<string, EnginePair[]> {
  const hosts = new Map<string, { nodes: Set<string>; pairs: EnginePair[] }>();
  for (const p of pairs) {
    if (!p.node) continue;
    const key = hostKeyOf(p.node);
    const h = hosts.get(key) ?? { nodes: new Set<string>(), pairs: [] };
    h.nodes.add(p.node.name);
    h.pairs.push(p);
    hosts.set(key, h);
  }
  return new Map(
    [...hosts].map(([key, h]) => [
      h.nodes.size === 1 ? `node ${[...h.nodes].join("")}` : `nodes ${[...h.nodes].join(", ")} (one host: ${key})`,
      h.pairs,
    ]),
  );
}
