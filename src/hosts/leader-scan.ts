// A node's group leaders as ownership reads them: the boot id, the live group leaders, the narwhal variables
// of their environments and the working directory of those that have one. Over SSH one helper script answers
// it all (ssh-scripts.ts SCAN_LEADERS; a full observation ran one command for the boot id, one for the process
// table, one for the environments and one readlink per engine there); on the controller's machine the same
// questions are asked of the host one by one, in process.
import type { HostAccess, LeaderScan } from "./types.js";

/** A leader is its group's leader (pgid = pid) and not a zombie. */
export const isLiveLeader = (p: { pid: number; pgid: number; state: string }): boolean =>
  p.state !== "Z" && p.pgid === p.pid;

/** scanLeaders through the host's own calls (LocalHost: each is a read in this process). */
export async function scanLeadersVia(host: HostAccess, names: string[]): Promise<LeaderScan> {
  const bootId = await host.bootId();
  const leaders = (await host.listProcesses()).filter(isLiveLeader);
  const envs = await host.processEnvs(
    leaders.map((p) => p.pid),
    names,
  );
  const cwds = new Map<number, string>();
  for (const [pid, env] of envs) {
    if (Object.keys(env).length === 0) continue;
    const cwd = await host.readLink(`/proc/${pid}/cwd`);
    if (cwd) cwds.set(pid, cwd);
  }
  return { bootId, leaders, envs, cwds };
}
