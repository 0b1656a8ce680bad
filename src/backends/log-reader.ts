// Reading an engine's log for `narwhal logs`: a file read from any offset, on
// the controller's machine or on the engine's node (through its HostAccess, so a
// node reached over ssh is read there), never whole into memory. Following polls
// the file's size: an engine's log is appended to by the engine alone, and a
// poll works the same on a local file and one at the far end of ssh.
import fs from "node:fs/promises";
import type { HostAccess } from "../hosts/types.js";

/** Most bytes one read returns: a 400 MiB log streams in pieces. */
export const READ_CHUNK = 1024 * 1024;

/** A log file on some machine, read by offset. */
export interface LogFile {
  /** Where it is, as an operator names it: a path, and the node when it is not this machine. */
  readonly where: string;
  /** Its size now; null when there is no file. */
  size(): Promise<number | null>;
  /** Up to `max` bytes from `offset` (fewer at the end). */
  read(offset: number, max: number): Promise<Buffer>;
}

export function localLogFile(file: string): LogFile {
  return {
    where: file,
    size: async () => {
      try {
        return (await fs.stat(file)).size;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
        throw err;
      }
    },
    read: async (offset, max) => {
      const handle = await fs.open(file, "r");
      try {
        const buf = Buffer.alloc(max);
        const { bytesRead } = await handle.read(buf, 0, max, offset);
        return buf.subarray(0, bytesRead);
      } finally {
        await handle.close();
      }
    },
  };
}

/**
 * `dd` reads exactly the bytes asked for (GNU coreutils' skip_bytes/count_bytes); base64 carries them
 * whole over a channel that is text: a UTF-8 sequence cut at a chunk's edge is not mangled, so offsets stay true.
 */
const NODE_READ = 'dd if="$1" iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none | base64 -w0';

/** A log file on a node, read there through its host access. */
export function nodeLogFile(host: HostAccess, file: string): LogFile {
  return {
    where: `${file} on node ${host.node}`,
    size: async () => (await host.stat(file))?.size ?? null,
    read: async (offset, max) => {
      const argv = ["sh", "-c", NODE_READ, "sh", file, String(offset), String(max)];
      const r = await host.run(argv, { env: { LC_ALL: "C" }, timeoutMs: 30_000 });
      if (r.code !== 0) throw new Error(`reading ${file} on node ${host.node}: ${r.stderr.trim() || `exit ${r.code}`}`);
      return Buffer.from(r.stdout.trim(), "base64");
    },
  };
}

/** The offset where the last `lines` lines of the first `size` bytes begin (read backwards, a chunk at a time). */
export async function tailOffset(log: LogFile, size: number, lines: number): Promise<number> {
  if (lines <= 0) return size;
  let end = size;
  let seen = 0;
  // A final newline ends the last line; it does not start another.
  let skipLast = true;
  while (end > 0) {
    const start = Math.max(0, end - 64 * 1024);
    const buf = await log.read(start, end - start);
    for (let i = buf.length - 1; i >= 0; i--) {
      if (buf[i] !== 0x0a) {
        skipLast = false;
        continue;
      }
      if (skipLast) {
        skipLast = false;
        continue;
      }
      if (++seen === lines) return start + i + 1;
    }
    end = start;
  }
  return 0;
}

export interface CopyOptions {
  /** Print only the last N lines that are there when it starts. */
  tail?: number;
  /** Keep printing what is appended until stop() says why to stop or the signal aborts. */
  follow?: {
    /** Asked between polls: a reason ends the follow (the rest of the file is printed first). */
    stop(): Promise<string | null>;
    pollMs: number;
    signal: AbortSignal;
  };
}

/** Waits `ms`, or less when `signal` aborts (a follow's poll ends at once when it is interrupted). */
export const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });

/**
 * Copy the log to `write`, and with `follow` what is appended to it afterwards. Resolves with why
 * the follow stopped (null: not following, or interrupted). A file that shrinks was truncated or
 * replaced: it is read again from its start.
 */
export async function copyLog(
  log: LogFile,
  write: (chunk: Buffer) => Promise<void>,
  opts: CopyOptions = {},
): Promise<string | null> {
  const drain = async (from: number, to: number) => {
    let pos = from;
    while (pos < to) {
      const chunk = await log.read(pos, Math.min(READ_CHUNK, to - pos));
      if (!chunk.length) break;
      await write(chunk);
      pos += chunk.length;
    }
    return pos;
  };
  const size = (await log.size()) ?? 0;
  let pos = await drain(opts.tail === undefined ? 0 : await tailOffset(log, size, opts.tail), size);
  const follow = opts.follow;
  if (!follow) return null;
  for (;;) {
    if (follow.signal.aborted) return null;
    // Asked before the last read: whatever the engine wrote before it stopped is printed.
    const why = await follow.stop();
    const now = (await log.size()) ?? 0;
    if (now < pos) pos = 0;
    pos = await drain(pos, now);
    if (why) return why;
    await pause(follow.pollMs, follow.signal);
  }
}
