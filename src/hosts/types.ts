// Host access: everything a host-side step does on an engine's node (run a
// tool, read or write a file, list processes and listeners) goes through this
// one interface, so a step reads the engine's own node whether that is the
// controller's machine (LocalHost) or a machine reached over SSH (SshHost).
import { NarwhalError } from "../errors.js";
import type { HelperPython } from "./stdlib-python.js";
import type { NodeFile, Placed } from "./ensure-files.js";

export interface RunOptions {
  /** Written to the command's stdin, which is then closed; without it stdin is empty. */
  stdin?: string | Buffer;
  /** Added to the node's base environment for this command. Names must be shell identifiers. */
  env?: Record<string, string>;
  /** Deadline: the command (on the node) is sent SIGTERM, then SIGKILL; the result says `timedOut`. */
  timeoutMs?: number;
  /** Aborting kills the command (on the node) and rejects with CancelledError. */
  signal?: AbortSignal;
  /** Working directory on the node. */
  cwd?: string;
  /** Sees the command's stderr as it arrives (a long script's progress lines); the result still holds all of it. */
  onStderr?: (chunk: string) => void;
}

export interface RunResult {
  /** The command's exit code; null when a signal ended it. 127: not found, 126: not executable (as a shell says). */
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  /** The deadline (timeoutMs) ended it: worth retrying, unlike a crash. */
  timedOut: boolean;
}

export interface FileStat {
  /** Symlinks are followed (like access(2) or Python's Path.exists); a device or FIFO is "other". */
  kind: "file" | "dir" | "other";
  size: number;
  /** Permission bits only (mode & 0o7777). */
  mode: number;
  mtimeMs: number;
  ino: number;
}

export interface ProcessInfo {
  pid: number;
  pgid: number;
  /** Field 22 of /proc/PID/stat: with the boot id, what tells a process from a reused pid. */
  startTicks: number;
  /** "R", "S", "Z", ...: a zombie ("Z") is not running. */
  state: string;
}

export interface Listener {
  /** As ss prints it, without brackets or a %interface scope: "0.0.0.0", "::", "*", "127.0.0.1". */
  address: string;
  port: number;
}

export interface SpawnDetachedOptions {
  /** Added to the node's base environment. Names must be shell identifiers. */
  env?: Record<string, string>;
  /** Working directory on the node. */
  cwd: string;
  /** stdout and stderr are appended to this file on the node (created 0600); stdin is /dev/null. */
  logFile: string;
}

/** A node's group leaders as ownership reads them (native-owned.ts, attestation-sidecar.ts). */
export interface LeaderScan {
  bootId: string;
  /** Group leaders (pgid = pid) that are not zombies. */
  leaders: ProcessInfo[];
  /** A leader's variables of the names asked for (processEnvs); a leader gone or unreadable is absent. */
  envs: Map<number, Record<string, string>>;
  /** /proc/PID/cwd of each leader that has any of the names asked for; absent when it cannot be read. */
  cwds: Map<number, string>;
}

export interface HostAccess {
  /** The node record's name, for error messages. */
  readonly node: string;
  readonly kind: "local" | "ssh";
  /** Run argv (no shell on the node's side: each element is one argument). A non-zero exit is a result, not an error. */
  run(argv: string[], opts?: RunOptions): Promise<RunResult>;
  /** The file's bytes; IoError (path, errno) when it cannot be read or is larger than maxBytes (EFBIG; default 8 MiB). */
  readFile(path: string, opts?: { maxBytes?: number }): Promise<Buffer>;
  /** null when nothing is at the path. */
  stat(path: string): Promise<FileStat | null>;
  /** Entry names of a directory (sorted); null when it does not exist. */
  readDir(path: string): Promise<string[] | null>;
  /** A symbolic link's target (a process's /proc/PID/cwd); null when it cannot be read (gone, not a link, not ours). */
  readLink(path: string): Promise<string | null>;
  /** Atomic on the node: a temp file beside it, then rename. Missing parent directories are created 0700. */
  writeFile(path: string, data: string | Buffer, mode: number): Promise<void>;
  /**
   * Start argv on the node as the leader of a new session (so of its own process group), detached:
   * it outlives this call, the controller and the SSH session. Resolves with its pid once it leads
   * its session. A command that cannot be executed rejects with IoError (syscall "spawn", path argv[0],
   * ENOENT or EACCES); a cwd or log file that cannot be opened with IoError naming it.
   */
  spawnDetached(argv: string[], opts: SpawnDetachedOptions): Promise<{ pid: number }>;
  listProcesses(): Promise<ProcessInfo[]>;
  /** The value of one variable in a process's environment (/proc/PID/environ), e.g. the launch token; null when absent or unreadable. */
  processEnvToken(pid: number, name: string): Promise<string | null>;
  /**
   * The named variables of many processes' environments in one call (one round trip over SSH): a pid
   * maps to those of `names` it has; a pid gone or unreadable is absent from the map.
   */
  processEnvs(pids: number[], names: string[]): Promise<Map<number, Record<string, string>>>;
  /** /proc/sys/kernel/random/boot_id: a recorded pid means nothing across a reboot. */
  bootId(): Promise<string>;
  /**
   * The node's boot id, its live group leaders, their variables of `names` and the working directory of each
   * leader that has any of them, in one call (one command over SSH, not one per question and one per leader).
   */
  scanLeaders(names: string[]): Promise<LeaderScan>;
  /**
   * Place files on the node as they must be (ensure-files.ts): an absent one is written atomically with its
   * mode (parents created 0700), one with the same bytes is left, one with other bytes is reported ("other")
   * and left. One command over SSH for all of them. IoError (path, errno) when one cannot be placed.
   */
  ensureFiles(files: NodeFile[]): Promise<Placed[]>;
  /** TCP listeners on the node, `ss -Hltn` parsed. */
  listeners(): Promise<Listener[]>;
  /** The node's python3 for narwhal's helpers, looked up once (stdlib-python.ts: runHelper, spawnHelper). */
  readonly helperPython: HelperPython;
  /** Release what the access holds (the SSH master connection). */
  close(): Promise<void>;
}

/** Most bytes readFile returns unless told otherwise: launch plans, configs and env files are small. */
export const DEFAULT_READ_MAX_BYTES = 8 * 1024 * 1024;

/**
 * A file read, stat or directory listing on a node: small files (configs, plans, /proc), answered in
 * milliseconds. One that does not finish is a filesystem that stopped answering (an NFS mount whose server
 * went away, where model directories often live): without a deadline the step that asked waited forever,
 * its engine shown in its last phase with no error.
 */
export const FILE_OP_TIMEOUT_MS = 30_000;

/** A file operation past its deadline (SshHost's scripts, LocalHost's file helper): outwaited, node and file named. */
export function fileOpOutwaited(node: string, syscall: string, file: string, timeoutMs: number): NarwhalError {
  return new NarwhalError(
    `node ${node}: ${syscall} '${file}' did not finish within ${timeoutMs / 1000} s: the filesystem holding it does not answer`,
    {
      failure: "outwait", // it answers again, or its mount is fixed: no desired edit is needed
      input: `node ${node}`,
      fix: `Check the filesystem holding ${file} on node ${node} (a hung mount, an NFS server that stopped answering); narwhal asks again.`,
    },
  );
}
