// Mount points a private dockerd leaves under its directories (overlay layers,
// container shm): unmounted before the directories are removed, by the private
// daemon's stop and by the rig's teardown and sweep (test/rig/net.ts).
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

/** Mount points at or below `dir`, deepest first. */
export function mountsUnder(dir: string): string[] {
  const text = readFileSync("/proc/self/mountinfo", "utf8");
  const points = text
    .split("\n")
    .map((l) => l.split(" ")[4])
    .filter((p): p is string => !!p && (p === dir || p.startsWith(dir + "/")))
    .map((p) => p.replace(/\\040/g, " "));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/** Lazily unmount everything at or below `dir` (synchronous: also runs from exit handlers). */
export function unmountUnder(dir: string): void {
  for (const m of mountsUnder(dir)) spawnSync("umount", ["-l", m], { stdio: "ignore" });
}
