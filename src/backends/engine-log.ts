// An engine's log is evidence of unknown size (a busy engine writes hundreds of
// MiB): it is read as a stream into a bounded buffer that keeps the first lines
// (startup: the KV-cache sizing capture reads) and the tail (why it exited),
// and never holds the whole log. The cap is NARWHAL_ENGINE_LOG_CAP_BYTES.
import fs from "node:fs/promises";
import path from "node:path";
import type { HostAccess } from "../hosts/types.js";
import { writeFileAtomic } from "../state/atomic-file.js";

/** An engine's log in its run directory: written by a native engine itself, copied from a container. */
export const ENGINE_LOG = "engine.log";

/** The head never takes more than a quarter of the cap, nor more than 1 MiB: the tail is what explains an exit. */
const HEAD_SHARE = 4;
const HEAD_MAX = 1024 * 1024;
/** Room for the omission marker line inside the cap. */
const MARKER_ROOM = 160;

/** What a reader of an engine's log gets: bounded text, and where the whole log is. */
export interface EngineLog {
  /** The log as text, at most the cap: all of it, or its first lines, an omission marker and its last lines. */
  text: string;
  /** Where the operator reads this engine's log: the run directory's engine.log, or the container's own log. */
  where: string;
  /** Set when the log could not be read to its end (a deadline, a daemon error, a missing file). */
  problem?: string;
}

/** Bounded capture of a byte stream: the first bytes and the last bytes, within `cap` in total. */
export class LogTail {
  private readonly headCap: number;
  private readonly head: Buffer[] = [];
  private headLen = 0;
  private readonly tail: Buffer[] = [];
  private tailLen = 0;
  /** Bytes seen in all, kept or not. */
  total = 0;

  constructor(readonly cap: number) {
    this.headCap = Math.min(HEAD_MAX, Math.floor(cap / HEAD_SHARE));
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    if (this.headLen < this.headCap) {
      const take = Math.min(chunk.length, this.headCap - this.headLen);
      this.head.push(chunk.subarray(0, take));
      this.headLen += take;
      chunk = chunk.subarray(take);
    }
    if (!chunk.length) return;
    this.tail.push(chunk);
    this.tailLen += chunk.length;
    // Drop whole chunks that lie entirely before the last `cap - head` bytes: memory stays near the cap.
    const keep = this.cap - this.headLen;
    while (this.tail.length > 1 && this.tailLen - this.tail[0]!.length >= keep)
      this.tailLen -= this.tail.shift()!.length;
  }

  /** The kept text: everything when it fits the cap, else whole first lines, a marker, and whole last lines. */
  bytes(): Buffer {
    const head = Buffer.concat(this.head);
    const tail = Buffer.concat(this.tail);
    if (this.total <= this.cap) return Buffer.concat([head, tail]);
    // Cut at line boundaries, so no line (or UTF-8 sequence) is kept half.
    const headEnd = head.lastIndexOf(0x0a) + 1;
    const keptHead = head.subarray(0, headEnd);
    const room = Math.max(0, this.cap - keptHead.length - MARKER_ROOM);
    let keptTail = tail.subarray(Math.max(0, tail.length - room));
    const nl = keptTail.indexOf(0x0a);
    if (nl >= 0 && nl < keptTail.length - 1) keptTail = keptTail.subarray(nl + 1);
    const omitted = this.total - keptHead.length - keptTail.length;
    const marker = Buffer.from(
      `[narwhal: ${omitted} bytes of this ${this.total}-byte log omitted; the cap is ${this.cap} bytes (NARWHAL_ENGINE_LOG_CAP_BYTES)]\n`,
    );
    return Buffer.concat([keptHead, marker, keptTail]);
  }

  text(): string {
    return this.bytes().toString("utf8");
  }
}

/**
 * Docker's multiplexed stdout/stderr stream (8-byte frame headers), split
 * incrementally: a frame may span chunks. A TTY container's log has no frames.
 */
export class FrameDemux {
  private pending = Buffer.alloc(0);
  private raw: boolean | undefined;
  private left = 0;

  push(chunk: Buffer): Buffer[] {
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    if (this.raw === undefined) {
      // Decide from the first 8 bytes, which may arrive in pieces.
      if (buf.length < 8) {
        this.pending = Buffer.from(buf);
        return [];
      }
      this.raw = !(buf[0]! <= 2 && buf[1] === 0 && buf[2] === 0 && buf[3] === 0);
    }
    if (this.raw) {
      this.pending = Buffer.alloc(0);
      return [buf];
    }
    const out: Buffer[] = [];
    for (;;) {
      if (this.left > 0) {
        const take = Math.min(this.left, buf.length);
        if (take) out.push(buf.subarray(0, take));
        this.left -= take;
        buf = buf.subarray(take);
        if (this.left > 0) break;
      }
      if (buf.length < 8) break;
      this.left = buf.readUInt32BE(4);
      buf = buf.subarray(8);
    }
    this.pending = Buffer.from(buf);
    return out;
  }

  /** At the stream's end: a log shorter than one header was never framed. */
  end(): Buffer[] {
    return this.raw === undefined && this.pending.length ? [this.pending] : [];
  }
}

/** The bounded text of a log file (native engines write theirs straight to the run directory). */
export async function readLogFile(file: string, cap: number): Promise<EngineLog> {
  const sink = new LogTail(cap);
  try {
    const handle = await fs.open(file, "r");
    try {
      // Head, then only the last `cap` bytes: a 400 MiB log is never read whole.
      const size = (await handle.stat()).size;
      const headCap = Math.min(HEAD_MAX, Math.floor(cap / HEAD_SHARE));
      const chunk = 1024 * 1024;
      const from = Math.max(Math.min(headCap, size), size - cap);
      const head = Buffer.alloc(Math.min(headCap, size));
      await handle.read(head, 0, head.length, 0);
      sink.push(head);
      // What lies between head and tail is counted as omitted, not read.
      sink.total += from - head.length;
      for (let pos = from; pos < size; pos += chunk) {
        const buf = Buffer.alloc(Math.min(chunk, size - pos));
        const { bytesRead } = await handle.read(buf, 0, buf.length, pos);
        sink.push(buf.subarray(0, bytesRead));
      }
    } finally {
      await handle.close();
    }
    return { text: sink.text(), where: file };
  } catch (err) {
    return { text: sink.text(), where: file, problem: `${file} could not be read: ${(err as Error).message}` };
  }
}

/** The last `bytes` of a local file (fewer when it is shorter); throws when it cannot be read. */
export async function readFileTail(file: string, bytes: number): Promise<Buffer> {
  const handle = await fs.open(file, "r");
  try {
    const { size } = await handle.stat();
    const length = Math.min(size, bytes);
    const buf = Buffer.allocUnsafe(length);
    const { bytesRead } = await handle.read(buf, 0, length, size - length);
    return buf.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/**
 * Only the end of an engine's log (`host` null: the controller's own file): its last `bytes`, from the
 * first whole line in them. For a caller that quotes the last lines, which must not read a 16 MiB cap
 * of every lost engine's log to do so. The log stays where it is: nothing is copied.
 */
export async function readLogTail(host: HostAccess | null, file: string, bytes: number): Promise<EngineLog> {
  const where = host ? `${file} on node ${host.node}` : file;
  try {
    const tail = host ? await nodeBytes(host, "tail", bytes, file) : await readFileTail(file, bytes);
    // A cut first line (or UTF-8 sequence) is dropped, unless it is the only line.
    const nl = tail.length >= bytes ? tail.indexOf(0x0a) : -1;
    return { text: (nl >= 0 && nl < tail.length - 1 ? tail.subarray(nl + 1) : tail).toString("utf8"), where };
  } catch (err) {
    return { text: "", where, problem: `${where} could not be read: ${(err as Error).message}` };
  }
}

/** `head -c`/`tail -c` of a file on a node: bytes at the start or the end, never the whole log. */
async function nodeBytes(host: HostAccess, tool: "head" | "tail", n: number, file: string): Promise<Buffer> {
  if (n <= 0) return Buffer.alloc(0);
  const r = await host.run([tool, "-c", String(n), "--", file], { env: { LC_ALL: "C" }, timeoutMs: 30_000 });
  if (r.code !== 0)
    throw new Error(`${tool} -c ${n} ${file} on node ${host.node}: ${r.stderr.trim() || `exit ${r.code}`}`);
  return Buffer.from(r.stdout, "utf8");
}

/**
 * The bounded text of an engine's log on its node. `host` null: the controller's own file. On a remote
 * node only the head and the last `cap` bytes cross the wire, and the bounded copy is kept in
 * `evidenceDir` (the controller's run directory) as engine.log, best-effort.
 */
export async function readNodeLog(
  host: HostAccess | null,
  file: string,
  cap: number,
  evidenceDir?: string,
): Promise<EngineLog> {
  if (!host) return readLogFile(file, cap);
  const where = `${file} on node ${host.node}`;
  const sink = new LogTail(cap);
  try {
    const st = await host.stat(file);
    if (!st) throw new Error("no such file");
    const headLen = Math.min(Math.min(HEAD_MAX, Math.floor(cap / HEAD_SHARE)), st.size);
    const head = await nodeBytes(host, "head", headLen, file);
    sink.push(head);
    const from = Math.max(head.length, st.size - cap);
    sink.total += from - head.length;
    sink.push(await nodeBytes(host, "tail", st.size - from, file));
  } catch (err) {
    return { text: sink.text(), where, problem: `${where} could not be read: ${(err as Error).message}` };
  }
  const text = sink.text();
  if (!evidenceDir) return { text, where };
  const copy = path.join(evidenceDir, ENGINE_LOG);
  try {
    await writeFileAtomic(copy, text, 0o600);
    return { text, where: copy };
  } catch (err) {
    return { text, where, problem: `the copy to ${copy} failed: ${(err as Error).message}` };
  }
}
