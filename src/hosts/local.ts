// The controller's own machine as a node: node.js APIs, no shell, /proc read
// directly. What it parses is shared with SshHost (proc-parse.ts).
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { CancelledError, NarwhalError, ioFailure } from "../errors.js";
import { writeFileAtomic } from "../state/atomic-file.js";
import {
  ENVIRON_EMPTY_READS,
  ENVIRON_REREAD_MS,
  parseEnviron,
  parseProcStat,
  parseSsListeners,
  pickNames,
} from "./proc-parse.js";
import { runChild } from "./run-child.js";
import { FileHelper, type RawStat } from "./file-helper.js";
import { HelperPython, type HelperPythonMemo } from "./stdlib-python.js";
import { ScansAfterRequest } from "./scan-after.js";
import { scanMachine, ScanOutwaited, SCRIPT_SCAN_FROM, SCRIPT_SCAN_TIMEOUT_MS } from "./local-scan.js";
import { FreshRead } from "./fresh-read.js";
import { ensureFilesVia, type NodeFile, type Placed } from "./ensure-files.js";
import { PROC_STAT_FILE, readProcEnviron, readProcStatSync, readWhole } from "./read-whole.js";
import {
  DEFAULT_READ_MAX_BYTES,
  FILE_OP_TIMEOUT_MS,
  type FileStat,
  type HostAccess,
  type LeaderScan,
  type Listener,
  type ProcessInfo,
  type RunOptions,
  type RunResult,
  type SpawnDetachedOptions,
} from "./types.js";

/** Most stdout a command may print before it is killed: tool output is small, a runaway is not. */
export const MAX_RUN_STDOUT_BYTES = 64 * 1024 * 1024;

/** A file-system result for a path that is a regular file's, a directory's or something else's. */
export function fileStatOf(st: RawStat): FileStat {
  const type = st.mode & 0o170000;
  const kind = type === 0o100000 ? "file" : type === 0o040000 ? "dir" : "other";
  return { kind, size: st.size, mode: st.mode & 0o7777, mtimeMs: st.mtimeMs, ino: st.ino };
}

/** The error a command's own output past the cap is. */
export function outputTooLarge(node: string, argv: string[]): NarwhalError {
  return new NarwhalError(`${argv.join(" ")} on node ${node} printed more than ${MAX_RUN_STDOUT_BYTES} bytes`, {
    retryable: false,
    fix: "Run the command by hand on the node and see why its output is so large.",
  });
}

/**
 * What is read in process (file-helper.ts says why the rest is not): the kernel's own filesystems, which
 * answer from memory (liveness polls and process scans read /proc many times a second), and the directories
 * the caller names as the controller's own (its state directory: run files and engine logs, which it
 * writes in process anyway).
 */
const IN_PROCESS_DIRS = ["/proc", "/sys", "/dev"];

export interface LocalHostOptions {
  /** The lookup of another LocalHost of the same baseEnv (the same machine, the same python3). */
  helperPython?: HelperPython;
  /** Directories read in process besides /proc, /sys and /dev: the controller's own (its state directory). */
  ownDirs?: string[];
  /** How long a read, stat or listing of any other file may take (default FILE_OP_TIMEOUT_MS; tests shorten it). */
  fileTimeoutMs?: number;
  /** Another LocalHost's helper (the same machine): shared, and ended by the host that made it. */
  fileHelper?: FileHelper;
  /** Where this machine's helper python lookup outlives the process (without helperPython; NodeHosts: the state's). */
  helperPythonMemo?: HelperPythonMemo;
  /** From how many /proc entries a scan of group leaders is one helper python's (default SCRIPT_SCAN_FROM). */
  scriptScanFrom?: number;
  /** How long that helper's scan may take (default SCRIPT_SCAN_TIMEOUT_MS; tests shorten it). */
  scriptScanTimeoutMs?: number;
  /** Another LocalHost's scans of group leaders (the same machine, the same process table): shared. */
  leaderScans?: ScansAfterRequest;
}

export class LocalHost implements HostAccess {
  readonly kind = "local" as const;

  readonly helperPython: HelperPython;
  /** Files outside the kernel's and the controller's own directories: read by a helper process, under a deadline. */
  readonly fileHelper: FileHelper;
  /** Whether this host made its file helper (and ends it at close), or shares another's. */
  private readonly ownsFileHelper: boolean;
  private readonly inProcessDirs: string[];
  /** This machine's scans of group leaders: each request answered by one that begins after it (scan-after.ts). */
  readonly leaderScans: ScansAfterRequest;

  /** baseEnv: the environment commands start from (config.hostEnv), never the controller's whole process.env. */
  constructor(
    readonly node: string,
    private readonly baseEnv: Record<string, string>,
    opts: LocalHostOptions = {},
  ) {
    this.helperPython = opts.helperPython ?? new HelperPython((argv, o) => this.run(argv, o), opts.helperPythonMemo);
    const by = {
      from: opts.scriptScanFrom ?? SCRIPT_SCAN_FROM,
      timeoutMs: opts.scriptScanTimeoutMs ?? SCRIPT_SCAN_TIMEOUT_MS,
    };
    this.leaderScans = opts.leaderScans ?? new ScansAfterRequest((names) => scanMachine(this, names, by));
    this.inProcessDirs = [...IN_PROCESS_DIRS, ...(opts.ownDirs ?? []).map((d) => path.resolve(d))];
    this.ownsFileHelper = !opts.fileHelper;
    this.fileHelper = opts.fileHelper ?? new FileHelper(opts.fileTimeoutMs ?? FILE_OP_TIMEOUT_MS);
  }

  async run(argv: string[], opts: RunOptions = {}): Promise<RunResult> {
    const [cmd, ...args] = argv;
    if (!cmd) throw new NarwhalError(`node ${this.node}: run needs a command`, { retryable: false });
    if (opts.signal?.aborted) throw new CancelledError(argv.join(" "));
    const r = await runChild(cmd, args, {
      env: { ...this.baseEnv, ...opts.env },
      cwd: opts.cwd,
      stdin: opts.stdin,
      timeoutMs: opts.timeoutMs,
      signal: opts.signal,
      maxStdoutBytes: MAX_RUN_STDOUT_BYTES,
      ...(opts.onStderr ? { onStderr: (chunk: Buffer) => opts.onStderr?.(chunk.toString("utf8")) } : {}),
    });
    if (r.aborted) throw new CancelledError(argv.join(" "));
    if (r.overflow) throw outputTooLarge(this.node, argv);
    if (r.spawnError) {
      const errno = r.spawnError.code;
      if (errno === "ENOENT" && opts.cwd) {
        // spawn says ENOENT for a missing cwd too: say which one is missing.
        const cwdStat = await this.stat(opts.cwd);
        if (cwdStat?.kind !== "dir") throw ioFailure(Object.assign(r.spawnError, { path: opts.cwd, syscall: "chdir" }));
      }
      // As a shell reports it: 127 not found, 126 not executable. Callers treat both as final.
      const code = errno === "ENOENT" || errno === "ENOTDIR" ? 127 : 126;
      return { code, signal: null, stdout: "", stderr: `${cmd}: ${r.spawnError.message}\n`, timedOut: false };
    }
    return { code: r.code, signal: r.signal, stdout: r.stdout, stderr: r.stderr, timedOut: r.timedOut };
  }

  /** Whether `file` is read in process (IN_PROCESS_DIRS and the ownDirs given), not by the file helper. */
  private inProcess(file: string): boolean {
    const abs = path.resolve(file);
    return this.inProcessDirs.some((d) => abs === d || abs.startsWith(d === "/" ? d : `${d}/`));
  }

  async readFile(file: string, opts: { maxBytes?: number } = {}): Promise<Buffer> {
    const max = opts.maxBytes ?? DEFAULT_READ_MAX_BYTES;
    try {
      if (PROC_STAT_FILE.test(file)) return procStat(file, max);
      if (!this.inProcess(file)) {
        const bytes = await this.fileHelper.readFile(this.node, file, max);
        if (bytes.length > max) throw tooLarge(file, max);
        return bytes;
      }
      return await readWhole(file, max, () => tooLarge(file, max));
    } catch (err) {
      throw ioFailure(err, { fix: `Check ${file} on node ${this.node}.` });
    }
  }

  async stat(file: string): Promise<FileStat | null> {
    try {
      return fileStatOf(this.inProcess(file) ? await fs.stat(file) : await this.fileHelper.stat(this.node, file));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") return null;
      throw ioFailure(err);
    }
  }

  async readDir(dir: string): Promise<string[] | null> {
    try {
      return (this.inProcess(dir) ? await fs.readdir(dir) : await this.fileHelper.readDir(this.node, dir)).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw ioFailure(err);
    }
  }

  async readLink(file: string): Promise<string | null> {
    // In-process: the orphan sweep reads one per owned engine, and a readlink process each cost a spawn.
    return fs.readlink(file).catch(() => null);
  }

  async writeFile(file: string, data: string | Buffer, mode: number): Promise<void> {
    try {
      await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
      await writeFileAtomic(file, data, mode);
    } catch (err) {
      throw ioFailure(err);
    }
  }

  async spawnDetached(argv: string[], opts: SpawnDetachedOptions): Promise<{ pid: number }> {
    const [cmd, ...args] = argv;
    if (!cmd) throw new NarwhalError(`node ${this.node}: spawnDetached needs a command`, { retryable: false });
    const log = await fs.open(opts.logFile, "a", 0o600).catch((err: unknown) => {
      throw ioFailure(err);
    });
    try {
      // detached: setsid(), so the child leads its own session and process group (what stop signals).
      const child = spawn(cmd, args, {
        env: { ...this.baseEnv, ...opts.env },
        cwd: opts.cwd,
        detached: true,
        stdio: ["ignore", log.fd, log.fd],
      });
      const pid = await new Promise<number>((resolve, reject) => {
        child.once("error", reject);
        child.once("spawn", () => resolve(child.pid!));
      });
      child.unref();
      return { pid };
    } catch (err) {
      const cwdStat = await this.stat(opts.cwd);
      // spawn says ENOENT for a missing cwd too: name the one that is missing.
      const at = cwdStat?.kind === "dir" ? { path: cmd, syscall: "spawn" } : { path: opts.cwd, syscall: "chdir" };
      throw ioFailure(Object.assign(err as Error, at));
    } finally {
      await log.close();
    }
  }

  async listProcesses(): Promise<ProcessInfo[]> {
    const pids = (await fs.readdir("/proc")).filter((n) => /^\d+$/.test(n));
    const found: ProcessInfo[] = [];
    for (const pid of pids) {
      // stat alone (read at once: readProcStatSync): nothing reads a listed process's arguments, and
      // /proc/PID/cmdline is the read that blocks on a hung process's memory lock.
      const file = `/proc/${pid}/stat`;
      try {
        const stat = parseProcStat(procStat(file, DEFAULT_READ_MAX_BYTES).toString("utf8"));
        found.push({ pid: stat.pid, pgid: stat.pgid, startTicks: stat.startTicks, state: stat.state });
      } catch {
        // exited between readdir and read
      }
    }
    return found;
  }

  async processEnvToken(pid: number, name: string): Promise<string | null> {
    return (await this.processEnvs([pid], [name])).get(pid)?.[name] ?? null; // null also when gone, or another user's
  }

  async processEnvs(pids: number[], names: string[]): Promise<Map<number, Record<string, string>>> {
    const found = new Map<number, Record<string, string>>();
    // Environments that read empty are read again together (proc-parse.ts ENVIRON_EMPTY_READS): a call waits
    // at most that many pauses, however many processes really have none.
    let pending = pids;
    for (let round = 1; pending.length > 0; round++) {
      const empty: number[] = [];
      let next = 0;
      const lane = async () => {
        while (next < pending.length) {
          const pid = pending[next++]!;
          const raw = await readEnvironText(`/proc/${pid}/environ`).catch(() => null); // gone, or another user's
          if (raw === null) continue;
          if (raw === "" && round < ENVIRON_EMPTY_READS) empty.push(pid);
          else found.set(pid, pickNames(parseEnviron(raw), names));
        }
      };
      await Promise.all(Array.from({ length: ENVIRON_READ_LANES }, lane));
      pending = empty;
      if (pending.length > 0) await new Promise((r) => setTimeout(r, ENVIRON_REREAD_MS));
    }
    return found;
  }

  /** This machine's boot id: read once per host object (it cannot change while this process runs). */
  private readonly bootIdRead = new FreshRead(
    async () => (await this.readFile("/proc/sys/kernel/random/boot_id")).toString("utf8").trim(),
    Number.POSITIVE_INFINITY, // a failed read is not kept: the next caller reads again
  );

  bootId(): Promise<string> {
    return this.bootIdRead.get();
  }

  async listeners(): Promise<Listener[]> {
    return listenersVia(this);
  }

  async scanLeaders(names: string[]): Promise<LeaderScan> {
    // A scan this machine's other node records share may be another LocalHost's: its outwait names this node.
    return this.leaderScans.scan(names).catch((err: unknown) => {
      throw err instanceof ScanOutwaited ? err.of(this.node) : err;
    });
  }

  ensureFiles(files: NodeFile[]): Promise<Placed[]> {
    return ensureFilesVia(this, files);
  }

  async close(): Promise<void> {
    if (this.ownsFileHelper) this.fileHelper.close();
  }
}

/**
 * Environments are read two at a time. Each read is two trips through libuv's threads (open and read:
 * read-whole.ts), and most of its CPU is those threads falling asleep and waking: two lanes keep them busy
 * (581 group leaders, when a read was four trips: 130 -> 93 ms of CPU a scan, 4 lanes 70, 8 lanes 45). Not
 * more: a read of a hung process's environ waits on that process's memory lock and holds one of libuv's four
 * threads until it ends, and two lanes leave the state's writes the other two.
 */
const ENVIRON_READ_LANES = 2;

/** A /proc/<pid>/stat, at once (readProcStatSync): readFile's and listProcesses' read of it. */
const procStat = (file: string, max: number): Buffer => readProcStatSync(file, max, () => tooLarge(file, max));

/** A process's /proc/<pid>/environ as text (the environment lookups). */
const readEnvironText = async (file: string): Promise<string> =>
  (await readProcEnviron(file, DEFAULT_READ_MAX_BYTES, () => tooLarge(file, DEFAULT_READ_MAX_BYTES))).toString("utf8");

function tooLarge(file: string, max: number): NodeJS.ErrnoException {
  return Object.assign(new Error(`EFBIG: file larger than ${max} bytes, read '${file}'`), {
    code: "EFBIG",
    syscall: "read",
    path: file,
  });
}

/** `ss -Hltn` on the node, parsed: one code path for every kind of host access. */
export async function listenersVia(host: HostAccess): Promise<Listener[]> {
  const r = await host.run(["ss", "-Hltn"], { env: { LC_ALL: "C" }, timeoutMs: 10_000 });
  if (r.code !== 0) {
    throw new NarwhalError(`ss -Hltn on node ${host.node} failed (exit ${r.code ?? r.signal}): ${r.stderr.trim()}`, {
      input: `node ${host.node}`,
      fix: "Install iproute2 (ss) on the node.",
      retryable: r.timedOut,
    });
  }
  return parseSsListeners(r.stdout);
}
