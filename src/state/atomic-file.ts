// Files that must survive a SIGKILL at any instant: write a temp file beside
// the target, fsync it, rename over the target, fsync the directory. A reader
// sees the old bytes or the new bytes, never a torn file.
import fs from "node:fs/promises";
import path from "node:path";
import { randomBytes } from "node:crypto";

export async function writeFileAtomic(file: string, data: string | Buffer, mode = 0o600): Promise<void> {
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  const handle = await fs.open(tmp, "wx", mode);
  try {
    await handle.writeFile(data);
    await handle.chmod(mode); // umask may have narrowed or widened the create mode
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await fsyncDir(dir);
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
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  const handle = await fs.open(tmp, "wx", mode);
  try {
    await handle.writeFile(data);
    await handle.chmod(mode);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await fs.link(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  } finally {
    await fs.rm(tmp, { force: true });
  }
  await fsyncDir(dir);
  return true;
}

export async function readJsonIfExists<T>(file: string): Promise<T | null> {
  try {
    return JSON.parse(await fs.readFile(file, "utf8")) as T;
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
