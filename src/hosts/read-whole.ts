// Reading a whole file through a numeric descriptor and fs's callback calls,
// not fs/promises' FileHandle: a FileHandle per file (an object with a
// finalizer, a promise per call) was most of the cost of reading many small
// /proc files. Measured on this 2-core machine, 1000 reads of /proc/<pid>/stat
// (what `status` of 1000 native engines reads): ~130-150 ms of CPU with
// FileHandle, ~50 ms so. The reads stay off the event loop (a /proc/<pid>/
// cmdline or environ read can wait on the process's memory lock, e.g. of an
// engine stuck in a GPU driver), which a synchronous read would not; only
// readProcStatSync below is synchronous, for the one /proc file that cannot wait.
import fs from "node:fs";
import { promisify } from "node:util";

const open = promisify(fs.open);
const read = (fd: number, buf: Buffer, offset: number): Promise<number> =>
  new Promise((resolve, reject) =>
    fs.read(fd, buf, offset, buf.length - offset, null, (err, n) => (err ? reject(err) : resolve(n))),
  );

/**
 * The whole file, read in chunks rather than by stat size (/proc and /sys files say 0, a log may grow
 * meanwhile): 4 KiB first (a /proc stat or boot id is a few hundred bytes), then up to 64 KiB at a time.
 * More than `maxBytes` throws `tooLarge()`. `shortReadEnds`: a read that returns less than it asked for is
 * the end, with no read after it to return 0 (a file the kernel answers in full up to the count: see
 * readProcEnviron).
 */
export async function readWhole(
  file: string,
  maxBytes: number,
  tooLarge: () => Error,
  shortReadEnds = false,
): Promise<Buffer> {
  const fd = await open(file, "r");
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    // A fixed 64 KiB per read cost 128 KiB of zeroed memory per small file, 250 MB for `status` of 1000
    // engines. Each chunk is filled before the next is taken, so a small file's read that finds its end needs none.
    let chunk = Buffer.allocUnsafe(4 * 1024);
    let used = 0;
    for (;;) {
      if (used === chunk.length) {
        chunks.push(chunk);
        chunk = Buffer.allocUnsafe(Math.min(chunk.length * 4, 64 * 1024));
        used = 0;
      }
      const asked = chunk.length - used;
      const n = await read(fd, chunk, used);
      total += n;
      if (total > maxBytes) throw tooLarge();
      used += n;
      if (n === 0 || (shortReadEnds && n < asked)) {
        chunks.push(chunk.subarray(0, used));
        return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
      }
    }
  } finally {
    // At once, not through libuv's threads: a close waits on nothing (of a /proc file it drops a reference),
    // and the trip was a third of an environment's read (a scan of 419 group leaders here, a no-op of 16
    // engines 0.238 -> 0.219 s of CPU; 1.4 ms, within noise, at 100).
    fs.closeSync(fd);
  }
}

/**
 * A process's /proc/<pid>/environ. The kernel answers a read of it in full up to the count asked (fs/proc/
 * base.c environ_read copies a page at a time until the count or the environment's end), so a short read is
 * its end: open, one read, close for nearly every process (environments are a few KiB), where reading until
 * a read returns 0 took another trip through libuv's threads. A scan reads every group leader's: LocalHost's
 * scan of 430 leaders, 62 -> 55 ms of CPU (medians of 9, interleaved, this machine). Off the event loop, as
 * every environ read: it can wait on a hung process's memory lock.
 */
export const readProcEnviron = (file: string, maxBytes: number, tooLarge: () => Error): Promise<Buffer> =>
  readWhole(file, maxBytes, tooLarge, true);

/** /proc/<pid>/stat (of a process; not of a thread, not /proc/self). */
export const PROC_STAT_FILE = /^\/proc\/\d+\/stat$/;

/**
 * A /proc/<pid>/stat, read synchronously: it takes no lock of the process's memory (the kernel's
 * do_task_stat reads its counters as they are), so unlike cmdline or environ it cannot wait on a hung
 * engine. A few hundred bytes; a scan of the host's processes and a liveness check per engine read one each,
 * and off the event loop each cost a round trip through libuv's threads: 1000 reads took 20-25 ms of CPU so,
 * 95-125 ms as readWhole (this 2-core machine, side by side).
 */
export function readProcStatSync(file: string, maxBytes: number, tooLarge: () => Error): Buffer {
  // Not readFileSync: a /proc file's size reads 0, so it takes a fresh 64 KiB buffer for every file
  // (1000 reads: 39-98 ms of CPU and 64 MB to collect, against 17-25 ms so: side by side, this machine).
  // 1 KiB comes from Buffer's pool and holds any stat line; a longer one doubles it.
  const fd = fs.openSync(file, "r");
  try {
    let buf = Buffer.allocUnsafe(1024);
    let used = 0;
    for (;;) {
      if (used === buf.length) {
        const grown = Buffer.allocUnsafe(buf.length * 2);
        buf.copy(grown);
        buf = grown;
      }
      const n = fs.readSync(fd, buf, used, buf.length - used, null);
      if (n === 0) return buf.subarray(0, used);
      used += n;
      if (used > maxBytes) throw tooLarge();
    }
  } finally {
    fs.closeSync(fd);
  }
}
