// Files that must survive a SIGKILL at any instant: write a temp file beside
// the target, fsync it, rename over the target, fsync the directory. A reader
// sees the old bytes or the new bytes, never a torn file. A write that fails
// (ENOSPC, EIO) removes its temp file; temps a killed process left behind are
// swept by sweepAtomicTemps at start.
import fs from "node:fs/promises";
import { closeSync, constants as fsc, openSync, readdirSync, readFileSync, type Stats } from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { processExists } from "../backends/proc.js";

/** `.<name>.<pid>.<8 hex>.tmp`: hidden, and naming the writer so a sweep can tell a live writer's temp from a dead one's. */
const TEMP_NAME = /^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$/;
/** The lock temp of narwhal before it wrote locks through writeFileExclusive: `controller.lock.<pid>.<ms>.tmp`. */
const LEGACY_LOCK_TEMP = /^controller\.lock\.(\d+)\.\d+\.tmp$/;

/** Write data to a fresh, synced temp file beside `file`; on any failure the temp file is removed. */
async function writeTemp(file: string, data: string | Buffer, mode: number): Promise<string> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  const handle = await fs.open(tmp, "wx", mode);
  try {
    try {
      await handle.writeFile(data);
      await handle.chmod(mode); // umask may have narrowed or widened the create mode
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (err) {
    // A full disk fails every write: without this, each state transition would leave one more temp.
    await fs.rm(tmp, { force: true });
    throw err;
  }
  return tmp;
}

export async function writeFileAtomic(file: string, data: string | Buffer, mode = 0o600): Promise<void> {
  const tmp = await writeTemp(file, data, mode);
  try {
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await fsyncDir(path.dirname(file));
}

export async function fsyncDir(dir: string): Promise<void> {
  const handle = await fs.open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Create a file that must not exist yet (evidence is immutable). Returns false
 * when it already exists, so callers decide whether that is reuse or refusal.
 * The file appears whole or not at all: it is written and synced under a
 * temporary name, then link()ed into place (which fails if the name exists),
 * so a SIGKILL never leaves a truncated evidence file that later reads as real.
 * Private by default (0600): evidence lives in run directories beside the engine's key.
 */
export async function writeFileExclusive(file: string, data: string | Buffer, mode = 0o600): Promise<boolean> {
  const tmp = await writeTemp(file, data, mode);
  try {
    await fs.link(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  } finally {
    await fs.rm(tmp, { force: true });
  }
  await fsyncDir(path.dirname(file));
  return true;
}

/**
 * Remove atomic-write temps under `dir` (to `depth` levels, symlinks not followed)
 * whose writer is gone: a process SIGKILLed mid-write leaves one, and nothing else
 * ever would. A temp naming a live pid is kept, since it may be mid-rename.
 * Returns the paths removed.
 */
export async function sweepAtomicTemps(dir: string, depth = 0): Promise<string[]> {
  const removed: string[] = [];
  // Listed at once (the state directory's own tree, as readOwnFile reads its files): at start it walks
  // every run directory of every engine, one after another, and through libuv's threads the 132
  // directories of 64 converged engines took 57 ms of CPU and 50 ms of wall, 35 and 22 ms so (this machine).
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return removed;
    throw err;
  }
  // A path is joined only for a directory or a temp: a run directory holds a file per KV proof (7,000
  // files at 64 converged engines), and joining each name cost 30 ms of a 64-engine no-op's CPU.
  for (const entry of entries) {
    if (entry.isDirectory()) {
      if (depth > 0) removed.push(...(await sweepAtomicTemps(path.join(dir, entry.name), depth - 1)));
      continue;
    }
    const writer = TEMP_NAME.exec(entry.name) ?? LEGACY_LOCK_TEMP.exec(entry.name);
    if (!entry.isFile() || !writer || processExists(Number(writer[1]))) continue;
    const full = path.join(dir, entry.name);
    await fs.rm(full, { force: true });
    removed.push(full);
  }
  return removed;
}

/** What sits at a path that should be a regular file: its text, nothing, or something else (named). */
export type RegularFileRead =
  | { kind: "text"; text: string; /** the bytes read (what a seal is checked against) */ bytes: Buffer }
  | { kind: "missing" }
  | { kind: "not-regular"; what: string };

function kindOf(st: Stats): string {
  if (st.isDirectory()) return "a directory";
  if (st.isFIFO()) return "a FIFO";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  return "not a regular file";
}

/**
 * Read a file that must be regular, without ever blocking on what it turns out
 * to be. stat() first, so a FIFO or a device (a symlink to /dev/zero, to a
 * watchdog) is never even opened; then open O_NONBLOCK and fstat, so a file
 * swapped for a FIFO in between cannot hang the read either.
 */
export async function readRegularFile(file: string): Promise<RegularFileRead> {
  // A writer renames a new file over this one at any instant: what is opened may be a newer
  // regular file than what was stat()ed (read it: old or new bytes, both whole), or gone (look again).
  for (let attempt = 0; ; attempt++) {
    let st: Stats;
    try {
      st = await fs.stat(file);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return { kind: "missing" };
      if (code === "ELOOP") return { kind: "not-regular", what: "a symlink loop" };
      throw err;
    }
    if (!st.isFile()) return { kind: "not-regular", what: kindOf(st) };
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(file, fsc.O_RDONLY | fsc.O_NONBLOCK | fsc.O_NOCTTY);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT" && attempt < 3) continue;
      throw err;
    }
    try {
      const opened = await handle.stat();
      if (!opened.isFile()) return { kind: "not-regular", what: kindOf(opened) };
      const bytes = await handle.readFile();
      return { kind: "text", text: bytes.toString("utf8"), bytes };
    } finally {
      await handle.close();
    }
  }
}

/**
 * A file of the state directory (a run directory's plan, evidence, environment; an inputs file), read
 * at once: they are the controller's own local files, a few KB, written whole before anything names
 * them. Through fs/promises each read is four trips through libuv's threads (open, fstat, read, close)
 * and a FileHandle; a no-op of 64 engines read six per engine so. O_NONBLOCK: a FIFO put in their place
 * reads as empty (and fails as JSON) instead of stopping the controller.
 */
export function readOwnFile(file: string): Buffer;
export function readOwnFile(file: string, encoding: "utf8"): string;
export function readOwnFile(file: string, encoding?: "utf8"): Buffer | string {
  const fd = openSync(file, fsc.O_RDONLY | fsc.O_NONBLOCK | fsc.O_NOCTTY);
  try {
    const bytes = readFileSync(fd);
    return encoding ? bytes.toString(encoding) : bytes;
  } finally {
    closeSync(fd);
  }
}

export async function readJsonIfExists<T>(file: string): Promise<T | null> {
  try {
    return JSON.parse(readOwnFile(file, "utf8")) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

export async function exists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}
