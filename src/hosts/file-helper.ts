// LocalHost's reads, stats and listings of files outside the kernel's and the controller's own directories
// (model directories, the operator's paths), made by a node process of narwhal's own, under a deadline.
//
// Why not in process: a read of a file whose filesystem stopped answering (an NFS mount whose server went
// away, where model directories often live) does not return. In process it holds one of libuv's four
// threads for good, and with it the step that asked; four such reads and no file of the controller's (its
// state included) is read or written again; and node cannot end such a thread, so the controller cannot
// even exit (measured: process.exit waits on it). A helper stuck in such a read is killed at the deadline
// (an NFS wait is killable), the read fails "outwait" naming node and file, and the next read starts a new
// helper. One helper for the machine (every LocalHost of a NodeHosts shares it), started at the first such
// read (a no-op makes none) and ended after 30 s without one (its ~40 MB of memory are not kept by a watch
// between inspections), answers them in order over its IPC channel: ~0.1 ms a read, where a process
// per read (sh and head or stat) cost ~5 ms of CPU, which made a cold converge of 16 engines 12% dearer,
// and a helper per node (16 local nodes) 8% (measured side by side).
import { spawn, type ChildProcess } from "node:child_process";
import { NarwhalError } from "../errors.js";
import { fileOpOutwaited } from "./types.js";

/** What the helper runs: synchronous node fs calls, one request at a time, errno kept. */
const HELPER_SOURCE = `
const fs = require("node:fs");
function read(file, max) {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOCTTY);
  try {
    const chunks = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(65536, max + 1 - total));
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      chunks.push(buf.subarray(0, n));
      total += n;
      if (total > max) break;
    }
    return Buffer.concat(chunks, total);
  } finally {
    fs.closeSync(fd);
  }
}
// Idle this long, it ends (its ~40 MB are not kept by a watch between inspections); the next read starts another.
const idleMs = Number(process.argv[1]);
let idle = setTimeout(() => process.exit(0), idleMs);
process.on("message", (m) => {
  clearTimeout(idle);
  let answer;
  try {
    if (m.op === "read") answer = { bytes: read(m.file, m.max) };
    else if (m.op === "stat") {
      const st = fs.statSync(m.file);
      answer = { stat: { mode: st.mode, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino } };
    } else answer = { names: fs.readdirSync(m.file) };
  } catch (e) {
    answer = { error: { code: String(e.code ?? "EIO"), message: String(e.message), syscall: e.syscall, path: m.file } };
  }
  process.send({ id: m.id, ...answer });
  idle = setTimeout(() => process.exit(0), idleMs);
});
process.on("disconnect", () => process.exit(0));
`;

/** A helper with nothing to do this long ends (a request that crosses its end is sent to the next one). */
const HELPER_IDLE_MS = 30_000;

/** How many helpers may end under one request before it fails (a helper that cannot run at all). */
const MAX_LOST_HELPERS = 2;

/** The fields of a stat FileStat is made of (local.ts fileStatOf): node's fs.Stats has them, as the helper's answer. */
export interface RawStat {
  mode: number;
  size: number;
  mtimeMs: number;
  ino: number;
}

type Request =
  { op: "read"; file: string; max: number } | { op: "stat"; file: string } | { op: "readdir"; file: string };

interface Answer {
  id: number;
  bytes?: Uint8Array;
  stat?: RawStat;
  names?: string[];
  error?: { code: string; message: string; syscall?: string; path: string };
}

interface Pending {
  id: number;
  /** The node the request is for (one helper serves every LocalHost of the machine): its errors name it. */
  node: string;
  request: Request;
  /** Helpers it was sent to that ended by themselves before answering it (a deadline's kill does not count). */
  lostHelpers: number;
  resolve: (a: Answer) => void;
  reject: (err: unknown) => void;
}

export class FileHelper {
  private child: ChildProcess | null = null;
  /** In the order sent: the helper answers one at a time, so the first is the one it is doing. */
  private pending: Pending[] = [];
  private deadline: NodeJS.Timeout | null = null;
  private nextId = 1;

  constructor(
    private readonly timeoutMs: number,
    /** How long the helper waits for a request before it ends (tests shorten it). */
    private readonly idleMs: number = HELPER_IDLE_MS,
  ) {}

  async readFile(node: string, file: string, max: number): Promise<Buffer> {
    const a = await this.ask(node, { op: "read", file, max });
    const bytes = a.bytes!;
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  async stat(node: string, file: string): Promise<RawStat> {
    return (await this.ask(node, { op: "stat", file })).stat!;
  }

  async readDir(node: string, dir: string): Promise<string[]> {
    return (await this.ask(node, { op: "readdir", file: dir })).names!;
  }

  /** Ends the helper (a host's close): what it is asked next starts another. Nothing is waiting on it then. */
  close(): void {
    for (const p of this.retire())
      p.reject(new NarwhalError(`node ${p.node}: the file helper was closed`, { retryable: true }));
  }

  /** The answer, or an errno error as node's own fs gives it (code, syscall, path), or the deadline's outwait. */
  private ask(node: string, request: Request): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      this.send({ id: this.nextId++, node, request, lostHelpers: 0, resolve, reject });
    }).then((a) => {
      if (!a.error) return a;
      throw Object.assign(new Error(a.error.message), a.error);
    });
  }

  private send(p: Pending): void {
    const child = (this.child ??= this.start());
    this.pending.push(p);
    this.armDeadline();
    try {
      child.send({ id: p.id, ...p.request });
    } catch {
      this.lost(child); // its channel closed under us: as if it ended
    }
  }

  /** Requests a helper held when it went: sent to a new one, unless helpers keep ending under them. */
  private resend(held: Pending[]): void {
    for (const p of held) {
      if (++p.lostHelpers > MAX_LOST_HELPERS) {
        p.reject(
          new NarwhalError(
            `node ${p.node}: the file helper process keeps ending (${p.request.op} '${p.request.file}')`,
            {
              retryable: true,
              fix: "Check the controller's machine for memory pressure or a process limit (its kernel log).",
            },
          ),
        );
      } else this.send(p);
    }
  }

  private start(): ChildProcess {
    // Only what node needs: no NODE_OPTIONS or certificates of the controller's environment to load.
    const child = spawn(process.execPath, ["-e", HELPER_SOURCE, String(this.idleMs)], {
      env: {},
      stdio: ["ignore", "ignore", "ignore", "ipc"],
      serialization: "advanced", // bytes cross as bytes, not as JSON arrays of numbers
    });
    child.on("message", (a: Answer) => this.answered(child, a));
    child.once("exit", () => this.lost(child));
    child.once("error", () => this.lost(child));
    // An idle helper never keeps the controller running (a request waiting on it has its deadline's timer).
    child.unref();
    child.channel?.unref();
    return child;
  }

  private answered(child: ChildProcess, a: Answer): void {
    if (child !== this.child) return;
    const at = this.pending.findIndex((p) => p.id === a.id);
    if (at < 0) return;
    const [p] = this.pending.splice(at, 1);
    this.disarm();
    this.armDeadline();
    p!.resolve(a);
  }

  /** The helper ended by itself (idle, or killed from outside) or could not be reached: what it held is asked of a new one. */
  private lost(child: ChildProcess): void {
    if (child === this.child) this.resend(this.retire());
  }

  /** The deadline of the request the helper is doing (the first); the others have not begun. */
  private armDeadline(): void {
    if (this.deadline || this.pending.length === 0) return;
    const head = this.pending[0]!;
    this.deadline = setTimeout(() => this.timedOut(head), this.timeoutMs);
  }

  private disarm(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = null;
  }

  /** The helper did not answer in time: it is killed, the request fails outwait, the rest go to a new helper. */
  private timedOut(head: Pending): void {
    const rest = this.retire().filter((p) => p !== head);
    const syscall = head.request.op === "readdir" ? "scandir" : head.request.op;
    head.reject(fileOpOutwaited(head.node, syscall, head.request.file, this.timeoutMs));
    // Not begun: the helper answers in order, so they wait on no filesystem yet (a new helper's deadline each).
    for (const p of rest) this.send(p);
  }

  /** Drops the helper (killed: it may be stuck in a read), returning the requests it held. */
  private retire(): Pending[] {
    this.disarm();
    const child = this.child;
    const held = this.pending;
    this.child = null;
    this.pending = [];
    if (child) {
      // Not waited for: a read stuck for good would hold its exit, and nothing of it is needed any more.
      child.removeAllListeners("message");
      child.kill("SIGKILL");
      if (child.connected) child.disconnect();
    }
    return held;
  }
}
