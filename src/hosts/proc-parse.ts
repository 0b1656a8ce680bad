// Parsers for what a Linux node reports about its processes and sockets, shared
// by every HostAccess (the text is the same whether read locally or over SSH).
import type { Listener } from "./types.js";

export interface ProcStat {
  pid: number;
  state: string;
  pgid: number;
  startTicks: number;
}

/** Parse /proc/<pid>/stat; the comm field may hold spaces and parentheses. */
export function parseProcStat(text: string): ProcStat {
  const close = text.lastIndexOf(")");
  const pid = Number(text.slice(0, text.indexOf(" ")));
  const rest = text.slice(close + 2).split(" ");
  // rest[0] is field 3 (state); field N is rest[N - 3].
  return { pid, state: rest[0] ?? "?", pgid: Number(rest[2]), startTicks: Number(rest[19]) };
}

/**
 * Reads of an environ that is empty: while a process execs (a shell's `exec`, a launcher's execve), the
 * kernel shows its environ as empty until the new image's is in place (4.5% of reads right after a spawn of
 * `sh -c '…; exec sleep 300'` here, a launch token then not found). Read again after a moment, all of a
 * call's empty ones together, so a call waits at most (ENVIRON_EMPTY_READS - 1) pauses of ENVIRON_REREAD_MS
 * however many processes were started with no environment at all (they stay empty).
 */
export const ENVIRON_EMPTY_READS = 10;
export const ENVIRON_REREAD_MS = 5;

/** /proc/<pid>/environ (NUL-separated NAME=value) as a record. */
export function parseEnviron(raw: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of raw.split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

/** Only `names` of an environment, those it has (a scan tells each asker only what it asked for). */
export function pickNames(env: Record<string, string>, names: string[]): Record<string, string> {
  return Object.fromEntries(names.flatMap((n) => (env[n] !== undefined ? [[n, env[n]]] : [])));
}

/** /proc/<pid>/cmdline: NUL-terminated arguments; an empty argument in the middle is kept. */
export function parseCmdline(raw: string): string[] {
  if (raw === "") return [];
  const args = raw.split("\0");
  if (raw.endsWith("\0")) args.pop();
  return args;
}

/** "[::ffff:1.2.3.4]:80", "127.0.0.53%lo:53", "*:22" → address and port; null when it is no address:port. */
function parseLocalAddress(field: string): Listener | null {
  const colon = field.lastIndexOf(":");
  if (colon <= 0) return null;
  const port = Number(field.slice(colon + 1));
  if (!Number.isInteger(port) || port < 0 || port > 65535) return null;
  let address = field.slice(0, colon);
  if (address.startsWith("[") && address.endsWith("]")) address = address.slice(1, -1);
  const scope = address.indexOf("%");
  if (scope >= 0) address = address.slice(0, scope);
  return { address, port };
}

/** `ss -Hltn` output: "LISTEN 0 4096 0.0.0.0:22 0.0.0.0:*" per line; the fourth column is the local address. */
export function parseSsListeners(text: string): Listener[] {
  const listeners: Listener[] = [];
  for (const line of text.split("\n")) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 5 || cols[0] !== "LISTEN") continue;
    const local = parseLocalAddress(cols[3]!);
    if (local) listeners.push(local);
  }
  return listeners;
}
