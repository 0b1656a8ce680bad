// Measuring one child process: wall time, CPU (user + sys, as the kernel accounts the reaped child) and peak
// RSS, through /usr/bin/time (GNU time: `-f`), and medians over runs.
import { spawnSync } from "node:child_process";

/**
 * Run `node ...args` once under /usr/bin/time.
 * @returns {{ wall: number, cpu: number, rssMb: number, code: number, stdout: string, stderr: string }}
 */
export function measureNode(args, options = {}) {
  return measureCommand(process.execPath, args, options);
}

/** Run `file ...args` once under /usr/bin/time (any command: docker-compose's `up -d` beside narwhal's). */
export function measureCommand(file, args, { cwd, env, okCodes = [0] } = {}) {
  const what = `${file === process.execPath ? "node" : file} ${args.join(" ")}`;
  const r = spawnSync("/usr/bin/time", ["-f", "BENCH %e %U %S %M", file, ...args], {
    cwd,
    env,
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
  });
  const line = r.stderr.trimEnd().split("\n").pop() ?? "";
  const m = /^BENCH ([\d.]+) ([\d.]+) ([\d.]+) (\d+)$/.exec(line);
  if (!m) throw new Error(`cannot measure ${what}: ${r.stderr.slice(-600)}`);
  // GNU time reports the child's status in its own exit code.
  const code = r.status ?? -1;
  if (!okCodes.includes(code))
    throw new Error(`${what} exited ${code} (expected ${okCodes.join(" or ")}):\n${r.stderr.slice(-1200)}`);
  const [wall, user, sys, rssKb] = m.slice(1).map(Number);
  return { wall, cpu: user + sys, rssMb: rssKb / 1024, code, stdout: r.stdout, stderr: r.stderr };
}

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)];
};

/** Samples of one named measurement; `summary()` gives the medians (and the peak RSS of all runs). */
export class Samples {
  wall = [];
  cpu = [];
  rss = [];
  codes = new Set();
  add(s) {
    this.wall.push(s.wall);
    this.cpu.push(s.cpu);
    this.rss.push(s.rssMb);
    this.codes.add(s.code);
    return s;
  }
  summary() {
    const r3 = (x) => Math.round(x * 1000) / 1000;
    return {
      runs: this.cpu.length,
      wall_s: r3(median(this.wall)),
      cpu_s: r3(median(this.cpu)),
      peak_rss_mb: Math.round(Math.max(...this.rss)),
      exit_codes: [...this.codes],
    };
  }
}

/** A plain environment for the CLI: nothing of the caller's NARWHAL_* leaks in. */
export function cleanEnv(extra = {}) {
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/root", NO_COLOR: "1", ...extra };
}
