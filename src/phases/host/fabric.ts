// The transfer fabric on the engine's node (seed 000: `ip address show dev
// "$NARWHAL_FABRIC_INTERFACE"` before launch; issue 10: the interface exists and
// carries NARWHAL_NODE_<n>_IP, and for RDMA the HCAs named in
// transfer.net_devices exist under /sys/class/infiniband). Read through `ip -j`
// (JSON, so no text parsing) and node.sysfs_root. Problems are collected, never thrown,
// except the host's own failures (cancelled, node unreachable).

import net from "node:net";
import path from "node:path";
import type { EngineSpec } from "../../desired/types.js";
import type { HostAccess } from "../../hosts/types.js";
import { problemFromError, type InspectionProblem } from "../inspect-problems.js";
import type { FabricObservation } from "../types.js";
import { fileErrno } from "./host-read.js";
import { bindHost } from "./ports.js";
import { toolFailure, type ToolRunOptions } from "./run-tool.js";

const INTERFACE_INPUT = "fabric_interface (NARWHAL_FABRIC_INTERFACE)";
const IP_FIX = (node: string, dev: string) =>
  `Install iproute2 (ip, with JSON output) on node ${node} and check that \`ip -j address show dev ${dev}\` works there.`;

interface IpAddressJson {
  ifname?: string;
  operstate?: string;
  addr_info?: Array<{ family?: string; local?: string }>;
}

/** `ip -j address show dev IF` → the interface's state and local addresses; throws on output of another shape. */
export function parseIpAddressJson(text: string): { operstate: string; addresses: string[] } {
  const parsed = JSON.parse(text) as unknown;
  const first = Array.isArray(parsed) ? (parsed[0] as IpAddressJson | undefined) : undefined;
  if (!first || typeof first !== "object") throw new Error(`ip -j printed ${text.trim().slice(0, 80) || "nothing"}`);
  const addresses = (first.addr_info ?? []).map((a) => a.local).filter((a): a is string => typeof a === "string");
  return { operstate: first.operstate ?? "UNKNOWN", addresses };
}

/** "mlx5_0:1" → HCA mlx5_0, port 1; a bare "mlx5_0" names every port. */
function hcaOf(netDevice: string): { name: string; port?: string } {
  const [name = "", port] = netDevice.split(":");
  return port ? { name, port } : { name };
}

/** The address the engine advertises must be on the fabric interface; a wildcard or a name cannot be compared. */
function nodeIpOf(spec: EngineSpec): string | undefined {
  const ip = bindHost(spec.nixl_host);
  return net.isIP(ip) !== 0 && ip !== "0.0.0.0" && ip !== "::" ? ip : undefined;
}

async function observeInterface(
  host: HostAccess,
  spec: EngineSpec,
  tool: ToolRunOptions,
  problems: InspectionProblem[],
): Promise<Pick<FabricObservation, "present" | "operstate" | "addresses" | "carries_node_ip">> {
  const dev = spec.fabric_interface;
  const r = await host.run(["ip", "-j", "address", "show", "dev", dev], {
    signal: tool.signal,
    timeoutMs: tool.timeoutMs,
    env: { LC_ALL: "C" },
  });
  if (r.code !== 0 && !r.timedOut && /does not exist/i.test(r.stderr)) {
    problems.push({
      message: `fabric interface ${dev} does not exist on node ${host.node}`,
      input: INTERFACE_INPUT,
      fix: `Bring up ${dev} on node ${host.node}, or set NARWHAL_FABRIC_INTERFACE to the interface that carries ${spec.nixl_host}.`,
      // A link comes and goes with its driver and the host's network setup (like a device path): outwaited, re-checked.
      failure: "outwait",
    });
    return { present: false, addresses: [], carries_node_ip: null };
  }
  if (r.code !== 0 || r.timedOut) {
    // Not found, not executable, timed out, failed: classified as for the GPU tools.
    const failed = toolFailure(host.node, "ip", ["-j", "address", "show", "dev", dev], INTERFACE_INPUT, tool, r);
    problems.push({ ...problemFromError(failed, INTERFACE_INPUT), fix: IP_FIX(host.node, dev) });
    return { present: false, addresses: [], carries_node_ip: null };
  }
  let shown: { operstate: string; addresses: string[] };
  try {
    shown = parseIpAddressJson(r.stdout);
  } catch (err) {
    problems.push({
      message: `ip -j address show dev ${dev} on node ${host.node} printed no interface JSON: ${(err as Error).message}`,
      input: INTERFACE_INPUT,
      fix: IP_FIX(host.node, dev),
      failure: "terminal",
    });
    return { present: false, addresses: [], carries_node_ip: null };
  }
  const ip = nodeIpOf(spec);
  const carries = ip === undefined ? null : shown.addresses.some((a) => a.toLowerCase() === ip.toLowerCase());
  if (carries === false) {
    problems.push({
      message: `fabric interface ${dev} on node ${host.node} does not carry ${ip} (it has ${shown.addresses.join(", ") || "no address"})`,
      input: `nixl_host (NARWHAL_NODE_${spec.index}_IP) / ${INTERFACE_INPUT}`,
      fix: `Configure ${ip} on ${dev} on node ${host.node}, or rerun discovery so NARWHAL_NODE_${spec.index}_IP is the interface's address.`,
      // Discovery derived NARWHAL_NODE_<n>_IP from this interface's address; an interface that is up
      // with other addresses means the plan and the host disagree, which waiting does not change.
      failure: "terminal",
    });
  }
  return { present: true, operstate: shown.operstate, addresses: shown.addresses, carries_node_ip: carries };
}

/** RDMA: every HCA (and port) in transfer.net_devices exists under <sysfs_root>/class/infiniband on the node. */
async function observeHcas(
  host: HostAccess,
  spec: EngineSpec,
  problems: InspectionProblem[],
): Promise<FabricObservation["hcas"]> {
  if (spec.launch.transfer.transport !== "ucx_rdma") return [];
  const hcas: FabricObservation["hcas"] = [];
  // One stat at a time: each is a round trip on a remote node.
  for (const [i, netDevice] of spec.launch.transfer.net_devices.entries()) {
    const hca = hcaOf(netDevice);
    const base = path.posix.join(spec.node.sysfs_root, "class", "infiniband", hca.name);
    const checked = hca.port ? path.posix.join(base, "ports", hca.port) : base;
    const present = await host.stat(checked).then(
      (st) => st !== null,
      (err: unknown) => {
        fileErrno(err);
        return false;
      },
    );
    hcas.push({ ...hca, checked, present });
    if (!present)
      problems.push({
        message: `RDMA device ${netDevice} is missing on node ${host.node} (looked for ${checked}; node.sysfs_root is "${spec.node.sysfs_root}")`,
        input: `launch.transfer.net_devices[${i}]`,
        fix: `Load the RDMA driver on node ${host.node} so ${netDevice} appears, or name the HCA:port the node has in transfer.net_devices.`,
        // Like a device path: an HCA appears when its driver loads; outwaited, re-checked.
        failure: "outwait",
      });
  }
  return hcas;
}

/** null when the engine names no fabric interface (nothing to check). */
export async function observeFabric(
  host: HostAccess,
  spec: EngineSpec,
  tool: ToolRunOptions,
  problems: InspectionProblem[],
): Promise<FabricObservation | null> {
  if (!spec.fabric_interface) return null;
  const iface = await observeInterface(host, spec, tool, problems);
  const hcas = await observeHcas(host, spec, problems);
  return { interface: spec.fabric_interface, ...iface, hcas };
}
