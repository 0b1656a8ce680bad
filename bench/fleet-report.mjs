// The machine a benchmark ran on, and the table bench/fleet.mjs prints (the README quotes it).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";

export function machine() {
  const cpuinfo = fs.readFileSync("/proc/cpuinfo", "utf8");
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? "unknown";
  return {
    nproc: Number(execFileSync("nproc", { encoding: "utf8" }).trim()),
    cpu: model,
    mem_gib: Math.round(os.totalmem() / 1024 ** 3),
    load_average_1m: Math.round(os.loadavg()[0] * 10) / 10,
    node: process.version,
  };
}

const f = (x, d = 2) => (typeof x === "number" && Number.isFinite(x) ? x.toFixed(d) : "-");

export function printTable(report) {
  const m = report.machine;
  console.log(`${m.nproc} cores ${m.cpu}, ${m.mem_gib} GiB, load ${m.load_average_1m}, node ${m.node}`);
  console.log(`medians of ${report.runs} runs; cpu = user + sys s; rss = peak MB over the runs`);
  const sizes = Object.keys(report.sizes);
  if (sizes.length > 0) {
    console.log(["command".padEnd(10), ...sizes.map((n) => `${n}: wall / cpu / rss`.padEnd(24))].join(" "));
    for (const name of ["validate", "plan", "status"])
      console.log(
        [
          name.padEnd(10),
          ...sizes.map((n) => {
            const s = report.sizes[n][name];
            return `${f(s.wall_s)} / ${f(s.cpu_s)} / ${s.peak_rss_mb}`.padEnd(24);
          }),
        ].join(" "),
      );
  }
  if (report.noop) {
    const { noop, floor, engines, cpu_over_floor, cold_converge_wall_s } = report.noop;
    console.log(
      `no-op reconcile --once, ${engines} native: cpu ${f(noop.cpu_s)} s, wall ${f(noop.wall_s)} s; floor (node -e 0) cpu ${f(floor.cpu_s)} s: ${f(cpu_over_floor, 1)}x the floor (cold converge ${f(cold_converge_wall_s, 1)} s wall)`,
    );
  }
  if (report.watch)
    console.log(
      `watch: save → first persisted transition, median ${report.watch.median_ms} ms (${report.watch.samples_ms.join(", ")} ms; debounce ${report.watch.debounce_ms} ms)`,
    );
}
