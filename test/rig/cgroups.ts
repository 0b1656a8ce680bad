// The cgroups a rig host's dockerd puts its containers under (--cgroup-parent
// /<namespace name>, test/rig/docker.ts): how the sweep finds a killed run's
// containers that have a network namespace of their own (NetworkMode none), which
// `ip netns pids` does not list. Synchronous: removeRig also runs from an exit handler.
import fs from "node:fs";
import path from "node:path";

const CGROUP_ROOT = "/sys/fs/cgroup";
/** Killed tasks leave their cgroup a moment after SIGKILL; rmdir is retried this long. */
const RMDIR_PATIENCE_MS = 2_000;

function subdirs(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => path.join(dir, e.name));
  } catch {
    return [];
  }
}

/** Every hierarchy's root: cgroup v2's one, or each v1 controller's (and the hybrid "unified"). */
function hierarchies(): string[] {
  return fs.existsSync(path.join(CGROUP_ROOT, "cgroup.procs")) ? [CGROUP_ROOT] : subdirs(CGROUP_ROOT);
}

/** Names of top-level cgroups (in any hierarchy) that pass `named`. */
export function rigCgroupNames(named: (name: string) => boolean): string[] {
  const names = hierarchies().flatMap((h) => subdirs(h).map((d) => path.basename(d)));
  return [...new Set(names)].filter(named);
}

/** A cgroup and every cgroup below it, deepest first. */
function tree(dir: string): string[] {
  return [...subdirs(dir).flatMap(tree), dir];
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** SIGKILL every task in the cgroups called `name` and below, then remove them (idempotent). */
export function removeRigCgroups(names: string[]): void {
  const dirs = hierarchies().flatMap((h) =>
    names
      .map((n) => path.join(h, n))
      .filter((d) => fs.existsSync(d))
      .flatMap(tree),
  );
  for (const dir of dirs) {
    const procs = fs.readFileSync(path.join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean);
    for (const pid of procs) {
      try {
        process.kill(Number(pid), "SIGKILL");
      } catch {
        /* already gone */
      }
    }
  }
  const deadline = Date.now() + RMDIR_PATIENCE_MS;
  for (const dir of dirs) {
    for (;;) {
      try {
        fs.rmdirSync(dir);
        break;
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code !== "EBUSY" || Date.now() > deadline) break; // gone already, or not ours to wait for
        sleepSync(20); // its killed tasks are still exiting
      }
    }
  }
}
