// Desired trees as data, written to disk the way an operator's editor would
// (temp file + rename), and read back from disk so a corpus mutation can be
// applied to any two-engine tree: the unit fixture or a running sim fleet's.
import { lstat, mkdir, mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseEnvFile } from "../../src/desired/env-file.js";
import { envText, type DesiredTree, type Obj } from "../desired/fixtures.js";

export type FileKey = "env" | "fleet" | "launch";
export const FILE_NAMES: Record<FileKey, string> = {
  env: "deployment.env",
  fleet: "fleet.json",
  launch: "engine-launch.json",
};
export const FILE_KEYS: readonly FileKey[] = ["env", "fleet", "launch"];

export type RawFiles = Partial<Record<FileKey, string | Buffer>>;

/** The file text a tree (plus raw overrides) writes. */
export function fileText(tree: DesiredTree, key: FileKey, raw: RawFiles = {}): string | Buffer {
  return raw[key] ?? (key === "env" ? envText(tree.env) : JSON.stringify(tree[key], null, 2));
}

/**
 * Write the three files into `dir`. Each is replaced atomically (temp + rename);
 * a directory or symlink a previous case left in its place is removed first.
 */
export async function writeDesired(dir: string, tree: DesiredTree, raw: RawFiles = {}): Promise<void> {
  for (const key of FILE_KEYS) {
    const target = join(dir, FILE_NAMES[key]);
    const st = await lstat(target).catch(() => undefined);
    if (st?.isDirectory()) await rm(target, { recursive: true, force: true });
    const tmp = join(dir, `.${FILE_NAMES[key]}.tmp`);
    await writeFile(tmp, fileText(tree, key, raw));
    await rename(tmp, target);
  }
}

/**
 * A fresh, empty desired directory `<tmp>/<prefix>XXXX/desired`. Cases that need a
 * place outside the tree (symlink targets) use its parent, so removeTree() takes both.
 */
export async function freshDir(prefix = "narwhal-corpus-"): Promise<string> {
  const dir = join(await mkdtemp(join(tmpdir(), prefix)), "desired");
  await mkdir(dir);
  return dir;
}

/** Remove what freshDir() made. */
export async function removeTree(dir: string): Promise<void> {
  await rm(dirname(dir), { recursive: true, force: true });
}

/** Read a tree back (deployment.env through narwhal's own parser). */
export async function readDesired(dir: string): Promise<DesiredTree> {
  const env = parseEnvFile(await readFile(join(dir, FILE_NAMES.env), "utf8"));
  if (env.issues.length > 0) throw new Error(`base tree has a bad deployment.env: ${JSON.stringify(env.issues)}`);
  return {
    env: { ...env.variables },
    fleet: JSON.parse(await readFile(join(dir, FILE_NAMES.fleet), "utf8")) as Obj,
    launch: JSON.parse(await readFile(join(dir, FILE_NAMES.launch), "utf8")) as Obj,
  };
}
