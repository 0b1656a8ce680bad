// The rig's iptables rule (test/rig/forward-rule.ts): what lets host-to-host traffic across its bridge where a
// Docker Engine set the FORWARD policy to DROP (test/e2e/rig.test.ts's hosts reach each other there through
// it). Read straight from iptables, not through the rig's helpers. A fresh machine has no iptables until
// docker.io brings it (the docker project installs it, alongside): the file is skipped there, visibly.
import { execFileSync, spawn } from "node:child_process";
import { describe, expect, test } from "vitest";
import { LINK_ALIAS_PREFIX, rigNames } from "../rig/net.js";
import { createRig } from "../rig/rig.js";

// stderr kept out of the test's output (iptables-nft warns there when legacy tables exist too)
const forwardChain = (): string[] =>
  execFileSync("iptables", ["-w", "-S", "FORWARD"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).split(
    "\n",
  );
const hasIptables = ((): boolean => {
  try {
    forwardChain();
    return true;
  } catch {
    return false;
  }
})();
/** The FORWARD rules naming `bridge`, as iptables -S prints them. */
const forwardRulesOf = (bridge: string): string[] => forwardChain().filter((l) => l.includes(` ${bridge} `));
const rule = (bridge: string, pid: number) =>
  `FORWARD -i ${bridge} -o ${bridge} -m comment --comment ${JSON.stringify(`${LINK_ALIAS_PREFIX}${pid}`)} -j ACCEPT`;

describe.skipIf(!hasIptables)("the rig's FORWARD rule", () => {
  test("lets the bridge's frames through while the rig lives, and goes with its teardown", async () => {
    const rig = await createRig({ hosts: 1 });
    try {
      expect(forwardRulesOf(rig.bridge)).toEqual([`-A ${rule(rig.bridge, process.pid)}`]);
    } finally {
      await rig.teardown();
    }
    expect(forwardRulesOf(rig.bridge)).toEqual([]);
  });

  test("a killed run's is swept by the next createRig; a live run's stays", async () => {
    const gone = spawn("true");
    const deadPid = await new Promise<number>((resolve) => gone.on("exit", () => resolve(gone.pid!)));
    const dead = rigNames(deadPid).bridge;
    const live = rigNames(process.pid).bridge; // this run's pid: not a leftover, whatever its bridge
    for (const [bridge, pid] of [
      [dead, deadPid],
      [live, process.pid],
    ] as const)
      execFileSync("sh", ["-c", `iptables -w -A ${rule(bridge, pid)}`]);
    try {
      const rig = await createRig({ hosts: 1 });
      await rig.teardown();
      expect(forwardRulesOf(dead)).toEqual([]);
      expect(forwardRulesOf(live)).toEqual([`-A ${rule(live, process.pid)}`]);
    } finally {
      for (const bridge of [dead, live])
        for (const l of forwardRulesOf(bridge)) execFileSync("sh", ["-c", `iptables -w ${l.replace("-A", "-D")}`]);
    }
  });
});
