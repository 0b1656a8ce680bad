// The small POSIX sh scripts SshHost runs on a node for file and process
// access: builtins and coreutils (head, stat, mkdir, mv), util-linux's setsid
// for a detached start, python3 one-liners for the process table and process
// environments (one process, not a fork per pid). Each gets its operands as
// "$1", "$2", never spliced into the script text.
import { ioFailure, NarwhalError } from "../errors.js";
import { ENVIRON_EMPTY_READS, ENVIRON_REREAD_MS, parseProcStat } from "./proc-parse.js";
import { isShellName } from "./ssh-quote.js";
import type { LeaderScan, ProcessInfo } from "./types.js";
import { isLiveLeader } from "./leader-scan.js";
import { STDLIB_FLAGS } from "./stdlib-python.js";

const STDLIB_FLAGS_SH = STDLIB_FLAGS.join(" ");

/** First line on stderr of every remote command: the pid of its session (= its process group). */
export const PID_MARKER = "narwhal-pid:";
/** A remote command's cwd does not exist. */
export const NO_CWD_MARKER = "narwhal-no-cwd";

/**
 * Prefix of every script: report the session's pid, then export the `vars` NAME=value lines that
 * arrive first on stdin (read(1) takes a pipe byte by byte, so the rest stays the command's input).
 */
export function wrapScript(script: string, vars: number, cwdLine: string): string {
  const exports = vars
    ? `n=${vars}; while [ "$n" -gt 0 ] && IFS= read -r l; do export "$l"; n=$((n-1)); done; unset n l; `
    : "";
  return `printf '${PID_MARKER}%s\\n' "$$" >&2; ${exports}${cwdLine}${script}`;
}

/** $1 file, $2 most bytes + 1: head stops there, so a runaway file never crosses the wire whole. */
export const READ_FILE = `exec head -c "$2" -- "$1"`;

/** $1 path: "<raw mode hex> <size> <mtime s.ms> <inode>", symlinks followed; exit 3 when nothing is there. */
export const STAT = `[ -e "$1" ] || exit 3; exec stat -L -c '%f %s %.3Y %i' -- "$1"`;

/** $1 dir: entry names, NUL-terminated (names may hold newlines); exit 3 when it does not exist. */
export const READ_DIR = `[ -d "$1" ] || exit 3; cd -- "$1" || exit 1
for f in .* *; do case $f in .|..) continue;; esac; [ -e "$f" ] || [ -h "$f" ] || continue; printf '%s\\000' "$f"; done`;

/** $1 file, $2 octal mode, data on stdin: temp beside it, synced, renamed over it; parents created 0700 (umask). */
export const WRITE_FILE = `f=$1; d=\${f%/*}; [ -n "$d" ] || d=/
umask 077; mkdir -p -- "$d" || exit 1
t="$d/.\${f##*/}.narwhal.$$.tmp"; trap 'rm -f -- "$t"' EXIT
cat > "$t" && chmod "$2" "$t" && sync -- "$t" && mv -f -- "$t" "$f" && trap - EXIT && sync -- "$d"`;

/** A detached start could not open its log file (stderr line before the shell's own message). */
export const SPAWN_LOG_MARKER = "narwhal-spawn-log";

/**
 * $1 log file, $2... the command: started under setsid(1) in the background with stdin /dev/null and
 * stdout+stderr appended to the log, so the ssh session holds none of its descriptors and ends at once.
 * A background child of a non-interactive sh is no group leader, so setsid(1) calls setsid() itself,
 * without forking: $! is the session leader. Printed once it leads its session (or is gone), so the
 * caller never reads a pid that is still the shell's. Exit 127/126: the command cannot be executed.
 */
export const SPAWN_DETACHED = `log=$1; shift
case $1 in
  */*) [ -e "$1" ] || { echo "$1: No such file or directory" >&2; exit 127; }
       [ -f "$1" ] && [ -x "$1" ] || { echo "$1: Permission denied" >&2; exit 126; } ;;
  *) command -v "$1" >/dev/null 2>&1 || { echo "$1: No such file or directory" >&2; exit 127; } ;;
esac
umask 077
{ : >> "$log"; } 2>/dev/null || { echo ${SPAWN_LOG_MARKER} >&2; : >> "$log"; exit 1; }
setsid "$@" </dev/null >>"$log" 2>&1 &
pid=$!; i=0
while s=$(cat "/proc/$pid/stat" 2>/dev/null); do
  s=\${s##*) }; set -- $s
  [ "$4" = "$pid" ] && break
  i=$((i+1)); [ $i -le 500 ] || break
  sleep 0.01
done
echo "$pid"`;

/** A Python generator: (pid string, /proc/PID/stat text) of every process still there when read. */
const PROC_STATS_PY = `
def proc_stats():
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            yield p, open("/proc/" + p + "/stat", "rb").read().decode("utf-8", "replace")
        except OSError:
            continue
`;

/**
 * $1 the helper interpreter (stdlib-python.ts): one JSON line per process, its /proc/PID/stat text, parsed
 * by the same code as LocalHost's reads.
 */
export const LIST_PROCESSES = `exec "$1" ${STDLIB_FLAGS_SH} -c '
import os, json, sys
${PROC_STATS_PY}
for p, s in proc_stats():
    sys.stdout.write(json.dumps(s) + "\\n")
'`;

/**
 * A Python function: read the environments of `pending` (pid strings), keep only `names`, and call
 * emit(pid, env) per readable pid. Empty environs are read again together (proc-parse.ts ENVIRON_EMPTY_READS).
 */
const READ_ENVIRONS_PY = `
def read_environs(pending, names, emit):
    for round in range(1, ${ENVIRON_EMPTY_READS} + 1):
        empty = []
        for p in pending:
            try:
                raw = open("/proc/" + p + "/environ", "rb").read().decode("utf-8", "replace")
            except OSError:
                continue
            if not raw and round < ${ENVIRON_EMPTY_READS}:
                empty.append(p)
                continue
            emit(int(p), dict(e.split("=", 1) for e in raw.split("\\0") if "=" in e and e.split("=", 1)[0] in names))
        pending = empty
        if not pending:
            break
        time.sleep(${ENVIRON_REREAD_MS / 1000})
`;

/**
 * $1 the helper interpreter, $2 comma-separated names, $3... pids: one JSON line [pid, {name: value}] per
 * readable pid, only the names asked for (the rest of an environment, keys included, never crosses the
 * wire); one process on the node, not one per pid.
 */
export const ENVIRONS = `py=$1; shift; exec "$py" ${STDLIB_FLAGS_SH} -c '
import json, sys, time
${READ_ENVIRONS_PY}
read_environs(sys.argv[2:], set(sys.argv[1].split(",")), lambda p, env: sys.stdout.write(json.dumps([p, env]) + "\\n"))
' "$@"`;

/**
 * HostAccess.scanLeaders in one Python process, its argv[1] the comma-separated names. First line: the boot
 * id (JSON). Then ["leader", stat text] per live group leader (its /proc/PID/stat, parsed by the same code as
 * LocalHost's reads; the test here is leader-scan.ts isLiveLeader's, on the fields parseProcStat reads), and
 * ["env", pid, {name: value}, cwd or null] per readable leader (read_environs), the cwd only of a leader that
 * has one of the names. Over ssh as SCAN_LEADERS; LocalHost runs it itself on a busy machine (local.ts).
 */
export const SCAN_LEADERS_PY = `
import json, os, sys, time
${READ_ENVIRONS_PY}
with open("/proc/sys/kernel/random/boot_id") as f:
    sys.stdout.write(json.dumps(f.read().strip()) + "\\n")
${PROC_STATS_PY}
leaders = []
for p, s in proc_stats():
    try:
        rest = s[s.rindex(")") + 2:].split(" ")
        if rest[0] == "Z" or rest[2] != p:
            continue
    except (ValueError, IndexError):
        continue
    sys.stdout.write(json.dumps(["leader", s]) + "\\n")
    leaders.append(p)
def emit(p, env):
    cwd = None
    if env:
        try:
            cwd = os.readlink("/proc/%d/cwd" % p)
        except OSError:
            pass
    sys.stdout.write(json.dumps(["env", p, env, cwd]) + "\\n")
read_environs(leaders, set(sys.argv[1].split(",")), emit)
`;

/** $1 the helper interpreter, $2 comma-separated names: SCAN_LEADERS_PY on the node (it holds no single quote). */
export const SCAN_LEADERS = `py=$1; shift; exec "$py" ${STDLIB_FLAGS_SH} -c '${SCAN_LEADERS_PY}' "$@"`;

/** SCAN_LEADERS' output as a LeaderScan. */
export function parseLeaderScan(stdout: string): LeaderScan {
  const [first, ...lines] = stdout.split("\n").filter(Boolean);
  const bootId = JSON.parse(first ?? '""') as string;
  const leaders: ProcessInfo[] = [];
  const envs = new Map<number, Record<string, string>>();
  const cwds = new Map<number, string>();
  for (const line of lines) {
    const entry = JSON.parse(line) as ["leader", string] | ["env", number, Record<string, string>, string | null];
    if (entry[0] === "leader") leaders.push(parseProcStat(entry[1]));
    else {
      envs.set(entry[1], entry[2]);
      if (entry[3]) cwds.set(entry[1], entry[3]);
    }
  }
  return { bootId, leaders: leaders.filter(isLiveLeader), envs, cwds };
}
const ERRNO_WORDS: Array<[RegExp, string]> = [
  [/No such file or directory/, "ENOENT"],
  [/Permission denied/, "EACCES"],
  [/Is a directory/, "EISDIR"],
  [/Not a directory/, "ENOTDIR"],
  [/Read-only file system/, "EROFS"],
  [/No space left on device/, "ENOSPC"],
  [/Disk quota exceeded/, "EDQUOT"],
  [/Operation not permitted/, "EPERM"],
  [/No such process/, "ESRCH"],
];

/** A failed remote file operation as the IoError a local one gives: the path, the errno (from the tool's words, LC_ALL=C). */
export function remoteIoError(node: string, syscall: string, file: string, stderr: string, errno?: string): unknown {
  const said = stderr.trim().split("\n").at(-1) ?? "";
  const code = errno ?? ERRNO_WORDS.find(([re]) => re.test(said))?.[1] ?? "EIO";
  const err = Object.assign(new Error(`${code}: ${said || "failed"} (on node ${node}), ${syscall} '${file}'`), {
    code,
    syscall,
    path: file,
  });
  return ioFailure(err, { fix: `Check ${file} on node ${node}.` });
}

/** A python3 script of narwhal's that failed on the node: 127 is no python3 there (final), anything else worth a retry. */
export function pythonScriptFailure(
  node: string,
  what: string,
  r: { code: number | null; signal: string | null; stderr: string },
): NarwhalError {
  return new NarwhalError(`node ${node}: ${what} failed (exit ${r.code ?? r.signal}): ${r.stderr.trim()}`, {
    input: `node ${node}`,
    fix: r.code === 127 ? "Install python3 on the node." : `Run the script by hand on node ${node} to see why.`,
    retryable: r.code !== 127,
  });
}

/** LIST_PROCESSES' output: one JSON string (a /proc/PID/stat) per line, parsed as LocalHost parses /proc. */
export function parseProcessLines(stdout: string): ProcessInfo[] {
  const found: ProcessInfo[] = [];
  for (const line of stdout.split("\n")) {
    if (!line) continue;
    const stat = parseProcStat(JSON.parse(line) as string);
    found.push({ pid: stat.pid, pgid: stat.pgid, startTicks: stat.startTicks, state: stat.state });
  }
  return found;
}

/** The variables of a remote command as the lines its wrapper reads from stdin; names and values checked. */
export function remoteEnv(
  node: string,
  env: Record<string, string>,
): { vars: Array<[string, string]>; envBlock: string } {
  const bad = Object.keys(env).find((k) => !isShellName(k));
  if (bad !== undefined)
    throw new NarwhalError(`node ${node}: environment variable name ${JSON.stringify(bad)} cannot be passed over SSH`, {
      retryable: false,
      input: bad,
      fix: "Use names of letters, digits and underscores.",
    });
  const vars = Object.entries(env);
  const multiline = vars.find(([, v]) => v.includes("\n"));
  if (multiline)
    throw new NarwhalError(`node ${node}: environment variable ${multiline[0]} holds a newline`, {
      retryable: false,
      input: multiline[0],
      fix: "Pass single-line values to a remote command (container.env values are single-line).",
    });
  return { vars, envBlock: vars.map(([k, v]) => `${k}=${v}\n`).join("") };
}
