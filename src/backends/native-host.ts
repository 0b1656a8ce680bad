// Native process identity on an engine's node, read through its HostAccess: the
// same checks whether the node is the controller's machine or one reached over
// SSH. A pid alone is reused, so a process is "ours" only while the node's boot
// id and the process's start tick match what was recorded when it started.
import { parseCmdline, parseProcStat, type ProcStat } from "../hosts/proc-parse.js";
import type { HostAccess } from "../hosts/types.js";
import { IoError, NarwhalError } from "../errors.js";

/** USER_HZ: the kernel ABI fixes it at 100 per second on every architecture it exports start ticks for. */
const CLK_TCK = 100;

/** A /proc/PID read's failure that means the process is gone: no such entry, or no such process while read. */
const goneErrno = (err: unknown): boolean => err instanceof IoError && (err.code === "ENOENT" || err.code === "ESRCH");

/**
 * /proc/PID/stat on the node, parsed; null when the process is gone (no such entry, or it went while read).
 * Anything else rejects: a node that did not answer, or a /proc that will not say, is no proof of a death
 * (taken for one, an engine that runs would be replaced, or a stop would believe it had ended it).
 */
export async function procStatOn(host: HostAccess, pid: number): Promise<ProcStat | null> {
  let text: string;
  try {
    text = (await host.readFile(`/proc/${pid}/stat`)).toString("utf8");
  } catch (err) {
    if (goneErrno(err)) return null;
    throw err;
  }
  // Empty: the process ended between the open and the read.
  return text.length === 0 ? null : parseProcStat(text);
}

/** True when pid runs on the node (not a zombie) with the recorded start tick. */
export async function isSameProcessOn(host: HostAccess, pid: number, startTicks: number): Promise<boolean> {
  const stat = await procStatOn(host, pid);
  return stat !== null && stat.state !== "Z" && stat.startTicks === startTicks;
}

/** Live (non-zombie) members of a process group on the node; with `token`, only those carrying that launch token. */
export async function groupMembersOn(host: HostAccess, pgid: number, token?: string): Promise<number[]> {
  const group = (await host.listProcesses()).filter((p) => p.pgid === pgid && p.state !== "Z").map((p) => p.pid);
  if (token === undefined) return group.sort((a, b) => a - b);
  const envs = await host.processEnvs(group, ["NARWHAL_LAUNCH_TOKEN"]);
  return group.filter((pid) => envs.get(pid)?.NARWHAL_LAUNCH_TOKEN === token).sort((a, b) => a - b);
}

/** The process's arguments on the node; empty when gone (a node that does not answer rejects, as procStatOn). */
export async function cmdlineOn(host: HostAccess, pid: number): Promise<string[]> {
  try {
    return parseCmdline((await host.readFile(`/proc/${pid}/cmdline`)).toString("utf8"));
  } catch (err) {
    if (goneErrno(err)) return [];
    throw err;
  }
}

/** Unix time (s) a process with these start ticks started: the node's boot time (btime) plus ticks. */
export async function startTimeOn(host: HostAccess, startTicks: number): Promise<number | null> {
  const stat = (await host.readFile("/proc/stat")).toString("utf8");
  const btime = Number(/^btime (\d+)$/m.exec(stat)?.[1]);
  return Number.isFinite(btime) ? btime + startTicks / CLK_TCK : null;
}

/** Send a signal to a whole process group on the node; a group already gone is fine. */
export async function signalGroupOn(host: HostAccess, pgid: number, sig: "TERM" | "KILL"): Promise<void> {
  // procps/util-linux kill(1): "--" ends options, so the negative pid is the group. Never without it:
  // procps-ng 4 reads "-s KILL -192" as "-1", which signals every process on the node.
  const r = await host.run(["kill", "-s", sig, "--", `-${pgid}`], { env: { LC_ALL: "C" }, timeoutMs: 10_000 });
  if (r.code === 0 || /no such process/i.test(r.stderr)) return;
  throw new NarwhalError(
    `kill -s ${sig} -- -${pgid} on node ${host.node} failed (exit ${r.code ?? r.signal}): ${r.stderr.trim()}`,
    {
      retryable: r.code !== 127,
      input: `node ${host.node}`,
      fix: r.code === 127 ? "Install kill(1) (procps) on the node." : "Check who owns the process group on the node.",
    },
  );
}
