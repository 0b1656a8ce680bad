// Where narwhal itself lives and what it is: the package root (found from this
// module's own path, so it works from src/ under vitest and from dist/), its
// version, git revision and the digest of the runtime check script. Recorded
// in every launch plan: a changed launcher requires a new prepared run.
import fs from "node:fs";
import path from "node:path";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import type { AppIdentity } from "./phases/plan.js";

export function packageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = path.join(dir, "package.json");
    if (fs.existsSync(pkg) && JSON.parse(fs.readFileSync(pkg, "utf8")).name === "narwhal") return dir;
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

export function appIdentity(): AppIdentity {
  const root = packageRoot();
  const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { version: string };
  let scriptSha = "missing";
  try {
    scriptSha = createHash("sha256").update(fs.readFileSync(checkScriptPath())).digest("hex");
  } catch {
    /* reported by the check phase when it runs */
  }
  return { name: "narwhal", version: pkg.version, revision: gitRevision(root), check_script_sha256: scriptSha };
}
