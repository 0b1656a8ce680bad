// Host-to-host traffic across a rig's bridge, on a machine whose iptables would drop it. A Docker
// Engine started with its defaults sets the FORWARD chain's policy to DROP and loads br_netfilter
// (net.bridge.bridge-nf-call-iptables=1): from then on, frames bridged between two hosts' veths
// pass the root namespace's FORWARD chain and are dropped, so hosts time out reaching each other
// while the controller still reaches every host (its traffic is OUTPUT, not FORWARD). The bridge's
// own nf_call_iptables=0 does not help: the kernel filters when either that or the sysctl is set.
// So the rig inserts one ACCEPT rule for frames in and out of its bridge, carrying the creating
// pid as its links do, and removes it with the bridge; a killed run's rule is swept by the next
// createRig (it would match nothing once its bridge is gone, but rules would pile up). Synchronous:
// removal also runs from a process "exit" handler.
import fs from "node:fs";
import { runSync } from "./run.js";

const BRIDGE_FILTER_SYSCTL = "/proc/sys/net/bridge/bridge-nf-call-iptables";

/** The rule's arguments after -I or -D: chain, match, target; `owner` is its comment ("narwhal-rig pid=<pid>"). */
export function forwardRule(bridge: string, owner: string): string[] {
  return ["FORWARD", "-i", bridge, "-o", bridge, "-m", "comment", "--comment", owner, "-j", "ACCEPT"];
}

const iptables = (op: "-I" | "-D" | "-S", args: string[]) => runSync(["iptables", "-w", op, ...args]);

/** Whether bridged frames pass iptables here (br_netfilter loaded with its sysctl on). */
function bridgeFiltered(): boolean {
  try {
    return fs.readFileSync(BRIDGE_FILTER_SYSCTL, "utf8").trim() === "1";
  } catch {
    return false; // br_netfilter is not loaded: bridged frames never see iptables
  }
}

/**
 * Insert the bridge's ACCEPT rule first in FORWARD; the rule, to remove later, or null where this
 * machine has no iptables (a firewall of nft alone, or none: its rules are not the rig's to change).
 * Throws when bridged frames pass iptables and the rule cannot be inserted: the hosts could not reach
 * each other, and the tests would only time out.
 */
export function allowBridgeForwarding(bridge: string, owner: string): string[] | null {
  if (runSync(["iptables", "-V"]).code !== 0) return null;
  const rule = forwardRule(bridge, owner);
  const r = iptables("-I", rule);
  if (r.code === 0) return rule;
  if (!bridgeFiltered()) return null;
  throw new Error(
    `rig: bridged frames pass iptables here (${BRIDGE_FILTER_SYSCTL} is 1) and \`iptables -w -I ${rule.join(" ")}\` ` +
      `failed (exit ${r.code}: ${r.stderr.trim()}), so the rig's hosts could not reach each other`,
  );
}

/** Delete the rule; idempotent (a rule already gone, or no iptables, is nothing to do). */
export function removeForwardRule(rule: string[]): void {
  iptables("-D", rule);
}

/** The rules in FORWARD whose comment is `ownerPrefix<pid>` with `dead(pid)`: a killed run's, to sweep. */
export function deadOwnersRules(ownerPrefix: string, dead: (pid: number) => boolean): string[][] {
  const rules: string[][] = [];
  for (const line of iptables("-S", ["FORWARD"]).stdout.split("\n")) {
    // iptables -S prints the comment quoted:
    // -A FORWARD -i nwrab12c -o nwrab12c -m comment --comment "narwhal-rig pid=123" -j ACCEPT
    const m = /^-A FORWARD -i (\S+) -o (\S+) -m comment --comment "([^"]*)" -j ACCEPT$/.exec(line.trim());
    if (!m || m[1] !== m[2] || !m[3]!.startsWith(ownerPrefix)) continue;
    const pid = Number(m[3]!.slice(ownerPrefix.length));
    if (Number.isInteger(pid) && pid > 0 && dead(pid)) rules.push(forwardRule(m[1]!, m[3]!));
  }
  return rules;
}
