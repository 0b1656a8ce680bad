// Measuring one child process: wall time, CPU (user + sys, as the kernel accounts the reaped child, in
// microseconds: bench/rusage.py) and peak RSS, and medians over runs.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const RUSAGE = path.join(path.dirname(fileURLToPath(import.meta.url)), "rusage.py");
// Debian's interpreter where it is (a pyenv shim on PATH would start a second Python first); its CPU is
// not the command's either way: the rusage is of the reaped command alone.
const PYTHON = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";

/**
 * Run `node ...args` once under bench/rusage.py.
 * @returns {{ wall: number, cpu: number, rssMb: number, code: number, stdout: string, stderr: string }}
 */
export function measureNode(args, options = {}) {
  return measureCommand(process.execPath, args, options);
}

/** Run `file ...args` once under bench/rusage.py (any command: docker-compose's `up -d` beside narwhal's). */
export function measureCommand(file, args, { cwd, env, okCodes = [0] } = {}) {
  const what = `${file === process.execPath ? "node" : file} ${args.join(" ")}`;
  // -I -S: no user site or site module, the least Python (its RSS at fork, ~7 MB, is the floor of a peak RSS here)
  const r = spawnSync(PYTHON, ["-I", "-S", RUSAGE, file, ...args], {
    cwd,
    env,
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
    stdio: ["pipe", "pipe", "pipe", "pipe"], // fd 3: rusage.py's report
  });
  const report = String(r.output?.[3] ?? "").trim();
  const m = /^([\d.]+) ([\d.]+) ([\d.]+) (\d+)$/.exec(report);
  if (!m) throw new Error(`cannot measure ${what}: ${r.error?.message ?? ""} ${String(r.stderr ?? "").slice(-600)}`);
  // rusage.py exits with the command's code.
  const code = r.status ?? -1;
  if (!okCodes.includes(code))
    throw new Error(`${what} exited ${code} (expected ${okCodes.join(" or ")}):\n${r.stderr.slice(-1200)}`);
  const [wall, user, sys, rssKb] = m.slice(1).map(Number);
  return { wall, cpu: user + sys, rssMb: rssKb / 1024, code, stdout: r.stdout, stderr: r.stderr };
}

/**
 * Where a run's JSON goes unless --json names it: `dir/<date><suffix>.json`, or `<date>-2<suffix>.json`, `-3`, …
 * when an earlier run of the day holds the name. A second run of a day used to overwrite the first, whose
 * figures the README may cite.
 */
export function resultFile(dir, date, suffix = "") {
  for (let n = 1; ; n++) {
    const file = path.join(dir, `${date}${n === 1 ? "" : `-${n}`}${suffix}.json`);
    if (!existsSync(file)) return file;
  }
}

/**
 * Write a run's report as JSON: to `json` when --json names a file (overwritten: the caller asked for it), else
 * to resultFile(dir, the report's date, suffix), exclusively (wx): a run started alongside that took the same
 * name fails rather than overwrite it. Says where, and returns the file.
 * @param {{ at: string }} report
 * @param {{ json?: string, dir: string, suffix?: string }} where
 */
export function writeResult(report, { json, dir, suffix = "" }) {
  const file = json ?? resultFile(dir, report.at.slice(0, 10), suffix);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(report, null, 2) + "\n", { flag: json ? "w" : "wx" });
  console.log(`written to ${path.relative(process.cwd(), file) || file}`);
  return file;
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

// Where a benchmark's fleet of fixed ports lives: below the kernel's ephemeral range (32768 up on Linux; a port
// there may be any connection's source port the moment an engine binds it) and below the test projects' slices
// (20000-32499, test/e2e/sim-fleet.ts), so a bench beside the tests takes none of theirs.
const BENCH_PORTS = { from: 10_000, to: 20_000 };

const listens = (port) =>
  new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });

/** The first port of `size` consecutive ports nothing listens on now, from a random block of BENCH_PORTS. */
export async function freePortBlock(size) {
  const blocks = Math.floor((BENCH_PORTS.to - BENCH_PORTS.from) / size);
  if (blocks < 1) throw new Error(`no block of ${size} ports between ${BENCH_PORTS.from} and ${BENCH_PORTS.to}`);
  const first = Math.floor(Math.random() * blocks);
  for (let i = 0; i < blocks; i++) {
    const base = BENCH_PORTS.from + ((first + i) % blocks) * size;
    let free = true;
    for (let p = base; p < base + size && free; p++) free = await listens(p);
    if (free) return base;
  }
  throw new Error(`every block of ${size} ports between ${BENCH_PORTS.from} and ${BENCH_PORTS.to} has one in use`);
}

/**
 * The fields of /proc/<pid>/stat after the parenthesised command name (which may hold spaces): [0] is the
 * state, [1] ppid, [11]..[14] utime, stime, cutime, cstime (clock ticks of 10 ms), [19] start time.
 * Throws when the process is gone.
 */
export function procStatFields(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

/**
 * Two no-ops before any is measured: the CLI's code cache of `reconcile` made by a run that ran steps (a cold
 * converge) is removed by the first no-op after it, and the next makes the no-op's own (src/cli/bin.ts), which
 * every later run takes. Measured, those two would be the cache's turnover, not the no-op an operator repeats.
 */
export function settleCodeCache(noop) {
  noop();
  noop();
}
