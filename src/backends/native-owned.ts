// Which native engines on a node are this controller's: group leaders whose
// environment carries a launch token, this state directory and this node's name
// (hosts that share one process table, as test rigs do, never adopt each other's
// engines), and on which node a recorded handle's process is to be looked for.
import path from "node:path";
import type { NodeHosts } from "../hosts/node-hosts.js";
import type { HostAccess, LeaderScan } from "../hosts/types.js";
import type { EngineHandle } from "../phases/types.js";
import { runsRoot } from "../state/run-dir.js";
import type { OwnedEngine } from "./types.js";

type NativeHandle = Extract<EngineHandle, { kind: "native" }>;

/**
 * Whether a process that says it runs on node `said` (NARWHAL_NODE; null before nodes were named)
 * belongs to a scan of `host`. The local host of a command that learned no nodes (`hosts` given, the
 * host unknown to it) takes every engine not named for a known node: it cannot tell them apart.
 */
function belongs(host: HostAccess, said: string | null, hosts?: NodeHosts): boolean {
  if (said === host.node) return true;
  if (said === null) return host.kind === "local";
  return !!hosts && host.kind === "local" && !hosts.spec(host.node) && !hosts.spec(said);
}

/** The controller's run directory a process's cwd on its node stands for (a remote node's dir is under work_dir). */
function runDirOf(host: HostAccess, cwd: string | undefined, stateDir: string, engine: string, hosts?: NodeHosts) {
  if (!cwd) return undefined;
  const spec = hosts?.spec(host.node);
  if (host.kind === "local" || !spec) return cwd;
  const [workDir, engineDir] = [
    path.posix.dirname(path.posix.dirname(cwd)),
    path.posix.basename(path.posix.dirname(cwd)),
  ];
  return workDir === path.posix.normalize(spec.work_dir) && engineDir === engine
    ? path.join(runsRoot(stateDir, engine), path.posix.basename(cwd))
    : undefined;
}

/**
 * The engines this state directory owns on one node (only the one with `token` when given). Throws
 * when the node cannot be reached. `hosts` lets the local host of a command that learned no nodes take
 * engines named for nodes it does not know.
 */
export async function findOwnedOn(
  host: HostAccess,
  stateDir: string,
  token?: string,
  hosts?: NodeHosts,
): Promise<OwnedEngine[]> {
  return ownedIn(host, await scanProcessTable(host), stateDir, token, hosts);
}

/** A host's process table as ownership needs it: its boot id, the group leaders, their narwhal variables and cwds. */
export type ProcessTable = LeaderScan;

export const scanProcessTable = (host: HostAccess): Promise<ProcessTable> =>
  host.scanLeaders(["NARWHAL_LAUNCH_TOKEN", "NARWHAL_STATE_DIR", "NARWHAL_ENGINE", "NARWHAL_NODE"]);

/** The engines of `table` (scanned on `host`, or on a host sharing its process table) that belong to `host`. */
export function ownedIn(
  host: HostAccess,
  { bootId, leaders, envs, cwds }: ProcessTable,
  stateDir: string,
  token?: string,
  hosts?: NodeHosts,
): OwnedEngine[] {
  const owned: OwnedEngine[] = [];
  for (const p of leaders) {
    const env = envs.get(p.pid);
    const launchToken = env?.NARWHAL_LAUNCH_TOKEN;
    if (!env || !launchToken || (token !== undefined && launchToken !== token)) continue;
    if (env.NARWHAL_STATE_DIR !== stateDir) continue;
    const engine = env.NARWHAL_ENGINE;
    if (token === undefined && !engine) continue;
    const said = env.NARWHAL_NODE ?? null;
    if (!belongs(host, said, hosts)) continue;
    const node = said ?? (hosts?.spec(host.node) || token !== undefined ? host.node : undefined);
    const runDir = engine ? runDirOf(host, cwds.get(p.pid), stateDir, engine, hosts) : undefined;
    owned.push({
      ...(runDir ? { run_dir: runDir } : {}),
      engine: engine ?? "?",
      launch_token: launchToken,
      // The scan lists live group leaders only (no zombie), with the boot id and start tick isAlive compares.
      running: true,
      handle: {
        kind: "native",
        pid: p.pid,
        pgid: p.pid,
        boot_id: bootId,
        start_ticks: p.startTicks,
        launch_token: launchToken,
        ...(node !== undefined ? { node } : {}),
      },
    });
  }
  return owned;
}

/**
 * The node a handle's process is looked for on. No node named: the controller's machine (records from
 * before nodes had ssh). A node this command did not learn (no desired state loaded): the controller's
 * machine when the handle's boot id is this machine's current one (a random id per boot, so it proves
 * the process ran here); otherwise the error naming the node and the fix.
 */
export async function nativeHostFor(hosts: NodeHosts, handle: NativeHandle): Promise<HostAccess> {
  if (handle.node === undefined || hosts.spec(handle.node)) return hosts.accessForHandle(handle);
  const local = hosts.local();
  if ((await local.bootId()) === handle.boot_id) return local;
  return hosts.access(handle.node);
}
