// A node reached over SSH, through the operator's own OpenSSH client: its
// known_hosts and agent semantics, strict host keys, and one multiplexed master
// connection per node (ControlMaster under the state directory), so N steps on
// a node cost one TCP+auth handshake, not N. Every remote command runs under
// /bin/sh, reports its session pid first (so a deadline or abort can end it on
// the node, and so ssh's own exit 255 is told from the command's), and gets
// its arguments quoted by shQuote.
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import type { Duplex } from "node:stream";
import { CancelledError, NarwhalError } from "../errors.js";
import { listenersVia, fileStatOf, outputTooLarge, MAX_RUN_STDOUT_BYTES } from "./local.js";
import { Slots } from "./slots.js";
import { FreshRead } from "./fresh-read.js";
import { ScansAfterRequest } from "./scan-after.js";
import { ENSURE_FILES, ensureFilesInput, parseEnsureFiles, type NodeFile, type Placed } from "./ensure-files.js";
import { runChild, type ChildOptions, type ChildResult } from "./run-child.js";
import { sshConnectionError, type SshTarget } from "./ssh-errors.js";
import { controlDirFor, helperPythonFile, sshClientArgs, type SshHostOptions } from "./ssh-options.js";
import { isShellName, shCommand, shQuote } from "./ssh-quote.js";
import * as scripts from "./ssh-scripts.js";
import { HelperPython, memoInFile, withHelperPython } from "./stdlib-python.js";
import { childStream, type StreamFailure } from "./ssh-stream.js";
import {
  DEFAULT_READ_MAX_BYTES,
  FILE_OP_TIMEOUT_MS,
  fileOpOutwaited,
  type FileStat,
  type HostAccess,
  type LeaderScan,
  type Listener,
  type ProcessInfo,
  type RunOptions,
  type RunResult,
  type SpawnDetachedOptions,
} from "./types.js";

/** The master outlives its last client by this long (ControlPersist). */
const CONTROL_PERSIST_S = 60;
/** Ending a timed-out or aborted remote command: the kill itself is bounded too. */
const REMOTE_KILL_TIMEOUT_MS = 10_000;
/** A detached start returns once its process leads its session: seconds, not the engine's lifetime. */
const SPAWN_TIMEOUT_MS = 30_000;

/**
 * Sessions open at once on the node's master: under sshd's MaxSessions (10 by default), with room for
 * the kill of a timed-out command and the master's own check. Docker streams count too.
 */
const MAX_SESSIONS = 8;

/** How long a node's boot id read stays current (SshHost.bootId). */
const BOOT_ID_FRESH_MS = 2_000;

/** A remote script's result with stdout's bytes (readFile is binary). */
type ScriptResult = RunResult & { bytes: Buffer };

export type { SshHostOptions } from "./ssh-options.js";

export class SshHost implements HostAccess {
  readonly kind = "ssh" as const;
  readonly node: string;
  private readonly target: SshTarget;
  private readonly controlDir: string;
  private master: Promise<void> | undefined;
  /** Sessions on the master: past sshd's MaxSessions ssh logs in beside it, and many logins at once are dropped. */
  private readonly sessions = new Slots(MAX_SESSIONS);
  /** When the master may have exited after its persist time (ms since epoch). */
  private masterFreshUntil = 0;
  readonly helperPython: HelperPython;

  constructor(private readonly opts: SshHostOptions) {
    this.node = opts.node;
    this.target = {
      node: opts.node,
      destination: opts.destination,
      port: opts.port ?? 22,
      knownHostsFile: opts.knownHostsFile ?? "~/.ssh/known_hosts",
      ...(opts.identityFile ? { identityFile: opts.identityFile } : {}),
    };
    this.controlDir = controlDirFor(opts.node, opts.stateDir);
    // The lookup is kept beside the control sockets, for the next command run on this node.
    const memo = memoInFile(helperPythonFile(this.controlDir, this.target));
    this.helperPython = new HelperPython((argv, o) => this.run(argv, o), memo);
  }

  /** One master per node: the first caller connects, the others wait for it rather than racing to be master. */
  private ensureMaster(): Promise<void> {
    if (this.master && Date.now() < this.masterFreshUntil) return this.master;
    const connecting = (async () => {
      await fs.mkdir(this.controlDir, { recursive: true, mode: 0o700 });
      await fs.chmod(this.controlDir, 0o700);
      const r = await this.ssh([this.opts.destination, "--", "true"], {});
      if (r.code !== 0)
        throw (
          sshConnectionError(r, this.target, false) ??
          new NarwhalError(`node ${this.node}: \`true\` over ssh exited ${r.code ?? r.signal}: ${r.stderr.trim()}`, {
            retryable: true,
            input: `node ${this.node} ssh.destination ${this.opts.destination}`,
          })
        );
    })();
    this.master = connecting;
    this.masterFreshUntil = Number.POSITIVE_INFINITY; // until this attempt settles
    connecting.then(
      () => this.touch(),
      () => {
        if (this.master === connecting) this.master = undefined;
      },
    );
    return connecting;
  }

  private touch(): void {
    // Margin under ControlPersist: past it the next command re-establishes the master first.
    this.masterFreshUntil = Date.now() + (CONTROL_PERSIST_S - 10) * 1000;
  }

  private ssh(args: string[], opts: Partial<ChildOptions>): Promise<ChildResult> {
    return runChild("ssh", [...sshClientArgs(this.opts, this.controlDir, CONTROL_PERSIST_S), ...args], {
      env: this.opts.clientEnv,
      maxStdoutBytes: MAX_RUN_STDOUT_BYTES,
      ...opts,
    }).then((r) => {
      if (r.spawnError)
        throw new NarwhalError(`node ${this.node}: the OpenSSH client cannot be run (${r.spawnError.code})`, {
          retryable: false,
          input: `node ${this.node} ssh`,
          fix: "Install the OpenSSH client (Debian: openssh-client) on the controller's machine.",
        });
      return r;
    });
  }

  /** A file operation's script (operands: the file, then `more`), under the node's file deadline. */
  private async fileScript(script: string, syscall: string, file: string, ...more: string[]): Promise<ScriptResult> {
    const timeoutMs = this.opts.fileTimeoutMs ?? FILE_OP_TIMEOUT_MS;
    const r = await this.script(script, [file, ...more], { timeoutMs });
    if (r.timedOut) throw fileOpOutwaited(this.node, syscall, file, timeoutMs);
    return r;
  }

  /** Run a sh script on the node with operands "$1"...; the one place commands cross the wire. */
  private async script(
    script: string,
    operands: string[],
    opts: RunOptions = {},
    /** narwhal's own scripts parse tools' messages: C locale. A caller's command keeps the node's. */
    cLocale = true,
  ): Promise<ScriptResult> {
    const what = `${operands[0] ?? script.split(" ")[0]} on node ${this.node}`;
    if (opts.signal?.aborted) throw new CancelledError(what);
    // Variables travel on stdin ahead of the command's own input, never in the command line: the ssh
    // client's and the remote shell's argv are readable by every user of either machine (API keys).
    const { vars, envBlock } = scripts.remoteEnv(this.node, { ...(cLocale ? { LC_ALL: "C" } : {}), ...opts.env });
    const cwd = opts.cwd
      ? `cd -- ${shQuote(opts.cwd)} 2>/dev/null || { echo ${scripts.NO_CWD_MARKER} >&2; exit 1; }; `
      : "";
    const remote = `exec /bin/sh -c ${shQuote(scripts.wrapScript(script, vars.length, cwd))} sh ${shCommand(operands)}`;
    await this.ensureMaster();
    let stderrSoFar = "";
    let remotePid: number | undefined;
    const r = await this.sessions.with(() =>
      this.ssh([this.opts.destination, "--", remote], {
        stdin: Buffer.concat([Buffer.from(envBlock), Buffer.from(opts.stdin ?? "")]),
        timeoutMs: opts.timeoutMs,
        signal: opts.signal,
        onStderr: (chunk: Buffer) => {
          // The pid marker line passes too: a caller reads only the lines it knows.
          opts.onStderr?.(chunk.toString("utf8"));
          if (remotePid !== undefined) return;
          stderrSoFar += chunk.toString("utf8");
          const m = new RegExp(`^${scripts.PID_MARKER}(\\d+)$`, "m").exec(stderrSoFar);
          if (m) remotePid = Number(m[1]);
        },
        beforeKill: () => this.killRemote(remotePid),
      }),
    );
    this.touch();
    if (r.aborted) throw new CancelledError(what);
    if (r.overflow) throw outputTooLarge(this.node, operands);
    const stderrLines = r.stderr.split("\n");
    const started = stderrLines.some((l) => l.startsWith(scripts.PID_MARKER));
    const failure = sshConnectionError(r, this.target, started);
    if (failure) throw failure;
    if (stderrLines.includes(scripts.NO_CWD_MARKER))
      throw scripts.remoteIoError(this.node, "chdir", opts.cwd ?? "", "", "ENOENT");
    const stderr = stderrLines.filter((l) => !l.startsWith(scripts.PID_MARKER)).join("\n");
    if (r.timedOut)
      return { code: null, signal: "SIGTERM", stdout: r.stdout, stderr, timedOut: true, bytes: r.stdoutBytes };
    return {
      code: r.code,
      signal: r.signal,
      stdout: r.stdout,
      stderr,
      timedOut: false,
      bytes: r.stdoutBytes,
    };
  }

  /** End a remote command's whole process group (its ssh session): TERM, then KILL after 2 s. */
  private async killRemote(pid: number | undefined): Promise<void> {
    if (pid === undefined) return;
    // dash's kill takes no "--": the signal name first, then the negative pid (the group).
    const kill = `kill -TERM -${pid} 2>/dev/null || exit 0; i=0
while kill -0 -${pid} 2>/dev/null && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; kill -KILL -${pid} 2>/dev/null; exit 0`;
    await this.ssh([this.opts.destination, "--", `exec /bin/sh -c ${shQuote(kill)}`], {
      timeoutMs: REMOTE_KILL_TIMEOUT_MS,
    });
  }

  async run(argv: string[], opts: RunOptions = {}): Promise<RunResult> {
    if (!argv[0]) throw new NarwhalError(`node ${this.node}: run needs a command`, { retryable: false });
    const { code, signal, stdout, stderr, timedOut } = await this.script(`exec "$@"`, argv, opts, false);
    return { code, signal, stdout, stderr, timedOut };
  }

  async readFile(file: string, opts: { maxBytes?: number } = {}): Promise<Buffer> {
    const max = opts.maxBytes ?? DEFAULT_READ_MAX_BYTES;
    const r = await this.fileScript(scripts.READ_FILE, "read", file, String(max + 1));
    if (r.code !== 0) throw scripts.remoteIoError(this.node, "open", file, r.stderr);
    if (r.bytes.length > max)
      throw scripts.remoteIoError(this.node, "read", file, `file larger than ${max} bytes`, "EFBIG");
    return r.bytes;
  }

  async stat(file: string): Promise<FileStat | null> {
    const r = await this.fileScript(scripts.STAT, "stat", file);
    if (r.code === 3) return null;
    if (r.code !== 0) throw scripts.remoteIoError(this.node, "stat", file, r.stderr);
    const [modeHex, size, mtime, ino] = r.stdout.trim().split(" ");
    return fileStatOf({
      mode: parseInt(modeHex ?? "0", 16),
      size: Number(size),
      mtimeMs: Math.round(Number(mtime) * 1000),
      ino: Number(ino),
    });
  }

  async readDir(dir: string): Promise<string[] | null> {
    const r = await this.fileScript(scripts.READ_DIR, "scandir", dir);
    if (r.code === 3) return null;
    if (r.code !== 0) throw scripts.remoteIoError(this.node, "scandir", dir, r.stderr);
    return r.stdout.split("\0").filter(Boolean).sort();
  }

  async readLink(file: string): Promise<string | null> {
    const r = await this.run(["readlink", "--", file], { timeoutMs: 10_000 }).catch(() => null);
    return r?.code === 0 && r.stdout.trim() ? r.stdout.trim() : null;
  }

  async writeFile(file: string, data: string | Buffer, mode: number): Promise<void> {
    const r = await this.script(scripts.WRITE_FILE, [file, mode.toString(8)], { stdin: data });
    if (r.code !== 0) throw scripts.remoteIoError(this.node, "open", file, r.stderr);
  }

  async spawnDetached(argv: string[], opts: SpawnDetachedOptions): Promise<{ pid: number }> {
    const [cmd] = argv;
    if (!cmd) throw new NarwhalError(`node ${this.node}: spawnDetached needs a command`, { retryable: false });
    // The engine keeps the node's locale; only the start itself is bounded.
    const r = await this.script(
      scripts.SPAWN_DETACHED,
      [opts.logFile, ...argv],
      { env: opts.env, cwd: opts.cwd, timeoutMs: SPAWN_TIMEOUT_MS },
      false,
    );
    if (r.code === 127 || r.code === 126)
      throw scripts.remoteIoError(this.node, "spawn", cmd, r.stderr, r.code === 127 ? "ENOENT" : "EACCES");
    const logFailed = r.stderr.split("\n").includes(scripts.SPAWN_LOG_MARKER);
    const pid = Number(r.stdout.trim());
    if (r.code !== 0 || !Number.isInteger(pid) || pid <= 0)
      throw logFailed
        ? scripts.remoteIoError(this.node, "open", opts.logFile, r.stderr)
        : new NarwhalError(
            `node ${this.node}: starting ${cmd} detached failed (exit ${r.code ?? r.signal}): ${r.stderr.trim()}`,
            {
              retryable: r.timedOut,
              input: `node ${this.node}`,
              fix: "Check that setsid (util-linux) is installed on the node and that it can start the command.",
            },
          );
    return { pid };
  }

  async listProcesses(): Promise<ProcessInfo[]> {
    const r = await this.helper(scripts.LIST_PROCESSES, [], { timeoutMs: 30_000 });
    if (r.code !== 0) throw scripts.pythonScriptFailure(this.node, "listing processes", r);
    return scripts.parseProcessLines(r.stdout);
  }

  async processEnvToken(pid: number, name: string): Promise<string | null> {
    // Only the one variable crosses the wire, not the environment (an engine's holds its key).
    return (await this.processEnvs([pid], [name])).get(pid)?.[name] ?? null;
  }

  async processEnvs(pids: number[], names: string[]): Promise<Map<number, Record<string, string>>> {
    const found = new Map<number, Record<string, string>>();
    if (!pids.length) return found;
    this.refuseNonNames(names);
    const r = await this.helper(scripts.ENVIRONS, [names.join(","), ...pids.map(String)], { timeoutMs: 30_000 });
    if (r.code !== 0) throw scripts.pythonScriptFailure(this.node, "reading process environments", r);
    for (const line of r.stdout.split("\n")) {
      if (!line) continue;
      const [pid, env] = JSON.parse(line) as [number, Record<string, string>];
      found.set(pid, env);
    }
    return found;
  }

  async scanLeaders(names: string[]): Promise<LeaderScan> {
    this.refuseNonNames(names);
    return this.leaderScans.scan(names);
  }

  /** The node's scans: each request answered by one that begins after it, one command for those made meanwhile. */
  private readonly leaderScans = new ScansAfterRequest(async (names) => {
    const r = await this.helper(scripts.SCAN_LEADERS, [names.join(",")], { timeoutMs: 30_000 });
    if (r.code !== 0) throw scripts.pythonScriptFailure(this.node, "scanning group leaders", r);
    return scripts.parseLeaderScan(r.stdout);
  });

  async ensureFiles(files: NodeFile[]): Promise<Placed[]> {
    if (files.length === 0) return [];
    const r = await this.helper(ENSURE_FILES, [], { stdin: ensureFilesInput(files), timeoutMs: 60_000 });
    if (r.code !== 0) throw scripts.pythonScriptFailure(this.node, "placing files", r);
    return parseEnsureFiles(this.node, files, r.stdout);
  }

  /** Names are passed to a helper script as one comma-separated operand: only shell names can be. */
  private refuseNonNames(names: string[]): void {
    const bad = names.find((n) => !isShellName(n));
    if (bad !== undefined)
      throw new NarwhalError(`node ${this.node}: ${JSON.stringify(bad)} is no environment variable name`, {
        retryable: false,
        input: bad,
      });
  }

  /** One of narwhal's Python scripts (its interpreter is $1), through the node's helper python (stdlib-python.ts). */
  private helper(script: string, operands: string[], opts: RunOptions): Promise<ScriptResult> {
    return withHelperPython(this.helperPython, (exe) => this.script(script, [exe, ...operands], opts));
  }

  /**
   * The node's boot id, read at most once in BOOT_ID_FRESH_MS: a start's and a probe's liveness polls ask for
   * it at every poll, and over ssh each read is a command on the node (32 of a cold converge's 307 for four
   * engines on four nodes). Nothing is lost by it: a node cannot reboot and run a process of a recorded pid
   * and start tick within it (the recorded tick counts from the boot before; a new boot's from zero).
   */
  private readonly bootIdRead = new FreshRead(
    async () => (await this.readFile("/proc/sys/kernel/random/boot_id")).toString("utf8").trim(),
    BOOT_ID_FRESH_MS,
  );

  bootId(): Promise<string> {
    return this.bootIdRead.get();
  }

  listeners(): Promise<Listener[]> {
    return listenersVia(this);
  }

  /**
   * A remote command's stdin and stdout as one byte stream, over the node's master connection: how a
   * Docker endpoint on the node is dialled (`docker system dial-stdio`, as the docker CLI's own ssh://
   * transport does). Failing to connect is the error every step sees (NodeUnreachable, HostKeyRejected,
   * NodeAuthFailed); any other failed exit is what `failure` makes of it.
   */
  async openStream(argv: string[], failure: StreamFailure): Promise<Duplex> {
    await this.ensureMaster();
    const release = await this.sessions.acquire();
    const child = spawn(
      "ssh",
      [
        ...sshClientArgs(this.opts, this.controlDir, CONTROL_PERSIST_S),
        this.opts.destination,
        "--",
        `exec ${shCommand(argv)}`,
      ],
      { env: this.opts.clientEnv, detached: true, stdio: ["pipe", "pipe", "pipe"] },
    );
    // The master outlives a cleanly ended stream by its persist time, as it does a command.
    child.once("close", (code) => {
      release();
      if (code === 0) this.touch();
    });
    child.once("error", release);
    return childStream(child, (r) => sshConnectionError(r, this.target, false) ?? failure(r));
  }

  /** End the master connection (`ssh -O exit`); a master already gone is fine. */
  async close(): Promise<void> {
    this.master = undefined;
    this.masterFreshUntil = 0;
    const r = await this.ssh(["-O", "exit", this.opts.destination], { timeoutMs: 10_000 });
    if (r.code !== 0) return; // no master was running
    // The master answers "exit" before it removes its socket and ends: closed means gone, so a
    // process started next never finds a master on its way out. Bounded: a master that lingers is harmless.
    for (let i = 0; i < 40; i++) {
      const check = await this.ssh(["-O", "check", this.opts.destination], { timeoutMs: 5_000 });
      if (check.code !== 0) return;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}
