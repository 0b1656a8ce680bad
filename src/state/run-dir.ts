// Run directories: state/runs/<engine>/<utc-stamp>-<hash8>/. A run directory
// appears whole or not at all (built under a hidden name, then renamed), and
// every file added later is created exclusively: evidence is never rewritten.
// Run directories hold the engine's private environment and key next to the
// evidence, so they are written as seed 000's `umask 077` shell writes them:
// directories 0700, files without group or other bits, whatever the caller's umask.
import fs from "node:fs/promises";
import path from "node:path";
import { exists, fsyncDir } from "./atomic-file.js";

/** seed 000's `umask 077`: nothing in a run directory is readable by group or others. */
export const RUN_UMASK = 0o077;
export const RUN_DIR_MODE = 0o700;

/** A run file's mode under RUN_UMASK (launch.json's read-only 0444 becomes 0400). */
export function runFileMode(mode: number): number {
  return mode & ~RUN_UMASK;
}

export function runsRoot(stateDir: string, engine: string): string {
  return path.join(stateDir, "runs", engine);
}

export function utcStamp(date = new Date()): string {
  return date.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");
}

export interface RunFile {
  name: string;
  data: string | Buffer;
  mode: number;
}

/** Create a fresh run directory holding `files`, atomically. */
export async function createRunDir(stateDir: string, engine: string, inputHash: string, files: RunFile[], now = new Date()): Promise<string> {
  const root = runsRoot(stateDir, engine);
  await fs.mkdir(root, { recursive: true, mode: RUN_DIR_MODE });
  let name = `${utcStamp(now)}-${inputHash.slice(0, 8)}`;
  // Two prepares within one second for the same hash (a retry) get distinct names.
  for (let n = 2; await exists(path.join(root, name)); n++) name = `${utcStamp(now)}-${inputHash.slice(0, 8)}-${n}`;
  const final = path.join(root, name);
  await createDirAtomically(final, files);
  return final;
}

/**
 * Create the directory `final` holding `files`: built under a hidden sibling
 * (`.<name>.partial`), then renamed, so it appears whole or not at all.
 */
export async function createDirAtomically(final: string, files: RunFile[]): Promise<void> {
  const root = path.dirname(final);
  const tmp = path.join(root, `.${path.basename(final)}.partial`);
  await fs.rm(tmp, { recursive: true, force: true });
  await fs.mkdir(tmp, { mode: RUN_DIR_MODE });
  await fs.chmod(tmp, RUN_DIR_MODE); // mkdir's mode is narrowed by the process umask, chmod's is exact
  for (const f of files) {
    const mode = runFileMode(f.mode);
    const handle = await fs.open(path.join(tmp, f.name), "wx", mode);
    try {
      await handle.writeFile(f.data);
      await handle.chmod(mode);
      await handle.sync();
    } finally {
      await handle.close();
    }
  }
  await fsyncDir(tmp);
  await fs.rename(tmp, final);
  await fsyncDir(root);
}


/**
 * A file name in `dir` that does not exist yet: `health.txt`, then
 * `health.2.txt`, ... Captures are immutable, so a repeated probe uses new names.
 */
export async function freshName(dir: string, name: string): Promise<string> {
  if (!(await exists(path.join(dir, name)))) return name;
  const ext = path.extname(name);
  const base = name.slice(0, name.length - ext.length);
  for (let n = 2; ; n++) {
    const candidate = `${base}.${n}${ext}`;
    if (!(await exists(path.join(dir, candidate)))) return candidate;
  }
}

/** Remove half-built run directories left by a killed controller. */
export async function removePartialRuns(stateDir: string, engine: string): Promise<void> {
  const root = runsRoot(stateDir, engine);
  let names: string[];
  try {
    names = await fs.readdir(root);
  } catch {
    return;
  }
  for (const n of names) if (n.startsWith(".") && n.endsWith(".partial")) await fs.rm(path.join(root, n), { recursive: true, force: true });
}
