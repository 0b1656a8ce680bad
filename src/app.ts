// Where narwhal itself lives and what it is: the package root (found from this
// module's own path, so it works from src/ under vitest and from dist/), its
// version, git revision and its launcher digest (src/launcher.ts). Recorded in
// every launch plan: a changed launcher requires a new prepared run.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { AppIdentity } from "./phases/plan.js";
import { readLauncher, type LauncherIdentity } from "./launcher.js";

/** The npm package narwhal is published as (scoped: the unscoped name `narwhal` is an unrelated package). */
export const PACKAGE_NAME = "@narwhal-fleet/narwhal";

export function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = path.join(dir, "package.json");
    if (fs.existsSync(pkg) && JSON.parse(fs.readFileSync(pkg, "utf8")).name === PACKAGE_NAME) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error("cannot find narwhal's package.json above " + fileURLToPath(import.meta.url));
    dir = parent;
  }
}

export function checkScriptPath(): string {
  return path.join(packageRoot(), "src", "phases", "check_runtime.py");
}

function gitRevision(root: string): string {
  try {
    const head = fs.readFileSync(path.join(root, ".git", "HEAD"), "utf8").trim();
    if (!head.startsWith("ref: ")) return head;
    const ref = head.slice(5);
    const loose = path.join(root, ".git", ref);
    if (fs.existsSync(loose)) return fs.readFileSync(loose, "utf8").trim();
    const packed = fs.readFileSync(path.join(root, ".git", "packed-refs"), "utf8");
    const line = packed.split("\n").find((l) => l.endsWith(` ${ref}`));
    return line ? line.split(" ")[0]! : "unknown";
  } catch {
    return "unknown";
  }
}

function packageVersion(root: string): string {
  return (JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { version: string }).version;
}

/** This narwhal's version alone (`--version`): not its git revision or its launcher's scripts (appIdentity's). */
export function narwhalVersion(): string {
  return packageVersion(packageRoot());
}

/** The launcher this narwhal is: its version and the scripts it ships, read from its own package. */
export function runningLauncher(): LauncherIdentity {
  const root = packageRoot();
  return readLauncher(root, packageVersion(root));
}

export function appIdentity(): AppIdentity {
  const root = packageRoot();
  return { name: "narwhal", version: packageVersion(root), revision: gitRevision(root), launcher: runningLauncher() };
}
