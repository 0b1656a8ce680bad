// A scan of the group leaders of the controller's own machine (HostAccess.scanLeaders for LocalHost): in
// process on a quiet machine, by one helper python on a busy one.
import fs from "node:fs/promises";
import { NarwhalError } from "../errors.js";
import { scanLeadersVia } from "./leader-scan.js";
import { parseLeaderScan, SCAN_LEADERS_PY } from "./ssh-scripts.js";
import { runHelper } from "./stdlib-python.js";
import type { HostAccess, LeaderScan } from "./types.js";

/**
 * A machine with this many /proc entries (processes, and some 60 of the kernel's own files) is scanned by a
 * helper python. In process a scan costs some 27 us of CPU per process (its stat) and 0.16 ms per group
 * leader (its environment: open and read through libuv's threads); the helper ~20 ms to start and ~0.05 ms
 * per leader, nearly all at once (this 2-core machine: 450 leaders, a no-op of 16 engines 0.243 -> 0.200 s
 * of CPU; of 192, 0.56 -> 0.50). Below it, in process is cheaper.
 */
export const SCRIPT_SCAN_FROM = 400;
/** How long a helper's scan may take (SshHost's scans have the same). */
export const SCRIPT_SCAN_TIMEOUT_MS = 30_000;

/** A helper's scan past its deadline, until it is told as the error of the node that asked (of()). */
export class ScanOutwaited extends Error {
  constructor(readonly ms: number) {
    super(`scan outwaited (${ms} ms)`);
  }

  of(node: string): NarwhalError {
    return new NarwhalError(
      `node ${node}: scanning its process group leaders took more than ${this.ms / 1000} s: the environment of a process could not be read (one hung with its memory locked, in a driver or on an unreachable mount)`,
      {
        input: `node ${node}`,
        retryable: true,
        fix: "Find the hung process (ps -eo pid,stat,wchan:32,args: state D) and end it or what it waits on; the next reconcile scans again.",
      },
    );
  }
}

/**
 * In process, each leader's environment costs two trips through libuv's threads (SCRIPT_SCAN_FROM says
 * what that comes to); on a busy machine one helper python reads them all (ssh-scripts.ts SCAN_LEADERS_PY,
 * the scan an SshHost runs), under a deadline a read in process does not have (a hung one holds a lane
 * for good). A helper that cannot run or fails leaves the scan to this process, as on a quieter machine;
 * one past its deadline is an error: in process the same read would never end.
 */
export async function scanMachine(
  host: HostAccess,
  names: string[],
  { from, timeoutMs }: { from: number; timeoutMs: number },
): Promise<LeaderScan> {
  if ((await fs.readdir("/proc")).length >= from) {
    const r = await runHelper(host, ["-c", SCAN_LEADERS_PY, names.join(",")], { timeoutMs });
    if (r.code === 0) return parseLeaderScan(r.stdout);
    if (r.timedOut) throw new ScanOutwaited(timeoutMs);
  }
  return scanLeadersVia(host, names);
}
