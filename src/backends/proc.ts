// Linux process identity on the controller's own machine (the state lock's
// holder): a PID alone is reused, so a process is the one recorded only when its
// boot id and start tick (field 22 of /proc/<pid>/stat) match. An engine's
// process is read on its node instead (native-host.ts).
import fs from "node:fs/promises";
import { parseProcStat, type ProcStat } from "../hosts/proc-parse.js";

export async function readBootId(procRoot = "/proc"): Promise<string> {
  return (await fs.readFile(`${procRoot}/sys/kernel/random/boot_id`, "utf8")).trim();
}

export { parseProcStat, type ProcStat } from "../hosts/proc-parse.js";

export async function readProcStat(pid: number): Promise<ProcStat | null> {
  try {
    return parseProcStat(await fs.readFile(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return null;
  }
}

/** True when some process (perhaps a zombie, perhaps another user's) has this pid. */
export function processExists(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false; // kill(0) and kill(-n) address process groups, not a pid
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The command line of a process, arguments joined by spaces, or null when it is gone or unreadable. */
export async function readProcCmdline(pid: number): Promise<string | null> {
  try {
    const raw = await fs.readFile(`/proc/${pid}/cmdline`, "utf8");
    const line = raw.split("\0").filter(Boolean).join(" ");
    return line || null; // kernel threads and zombies have an empty command line
  } catch {
    return null;
  }
}

/** Linux reports start ticks in USER_HZ, which the kernel ABI fixes at 100 per second on every architecture it exports. */
const USER_HZ = 100;

/** Wall-clock time (ms) at which a process with these start ticks started: boot time (btime in /proc/stat) plus ticks. */
export async function processStartedAtMs(startTicks: number): Promise<number | null> {
  try {
    const btime = /^btime (\d+)$/m.exec(await fs.readFile("/proc/stat", "utf8"));
    return btime ? Number(btime[1]) * 1000 + (startTicks * 1000) / USER_HZ : null;
  } catch {
    return null;
  }
}
