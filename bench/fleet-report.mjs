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

const f = (x, d = 3) => (typeof x === "number" && Number.isFinite(x) ? x.toFixed(d) : "-");

export function printTable(report) {
  const m = report.machine;
  console.log(`${m.nproc} cores ${m.cpu}, ${m.mem_gib} GiB, load ${m.load_average_1m}, node ${m.node}`);
  console.log(`medians of ${report.runs} runs; cpu = user + sys s; rss = peak MB over the runs`);
  printSizes(report.sizes, "command", (n) => `${n}: wall / cpu / rss`, ["validate", "plan", "status"]);
  const converged = report.sizes_converged ?? {};
  if (Object.keys(converged).length > 0) {
    console.log("against converged records (a real P/D pair's, cloned in pools of 16; every in-pool pair proven):");
    printSizes(converged, "state", (n) => `${n}: ${converged[n].state_mb} MB, ${converged[n].proofs} proofs`, [
      "plan",
      "status",
    ]);
  }
  if (report.noop) {
    const {
      noop,
      floor,
      engines,
      cpu_over_floor,
      cold_converge_wall_s: cold,
      cold_converge_cpu_s: coldCpu,
      pair_cold_converge_wall_s: pair,
    } = report.noop;
    console.log(
      `no-op reconcile --once, ${engines} native: cpu ${f(noop.cpu_s)} s, wall ${f(noop.wall_s)} s; floor (node -e 0) cpu ${f(floor.cpu_s)} s: ${f(cpu_over_floor, 1)}x the floor`,
    );
    // runs before this field existed have no pair
    const against = pair === undefined ? "" : `; one P/D pair ${f(pair, 1)} s: ${f(cold / pair, 1)}x`;
    const cpu = coldCpu === undefined ? "" : `, ${f(coldCpu, 1)} s CPU`;
    console.log(`cold converge, ${engines} native: ${f(cold, 1)} s wall${cpu}${against} (one run each)`);
  }
  if (report.scale) printScale(report.scale);
  if (report.watch)
    console.log(
      `watch: save → first persisted transition, median ${report.watch.median_ms} ms (${report.watch.samples_ms.join(", ")} ms; debounce ${report.watch.debounce_ms} ms)`,
    );
  if (report.compose?.skipped) console.log(`compose: skipped: ${report.compose.skipped}`);
  else if (report.compose) printCompose(report.compose);
}

/** One row per command of `names`, one column per fleet size of `bySize`, under a heading row. */
function printSizes(bySize, heading, column, names) {
  const sizes = Object.keys(bySize);
  if (sizes.length === 0) return;
  console.log([heading.padEnd(10), ...sizes.map((n) => column(n).padEnd(24))].join(" "));
  for (const name of names)
    console.log(
      [
        name.padEnd(10),
        ...sizes.map((n) => {
          const s = bySize[n][name];
          return `${f(s.wall_s)} / ${f(s.cpu_s)} / ${s.peak_rss_mb}`.padEnd(24);
        }),
      ].join(" "),
    );
}

/** The compose part's rows: narwhal and docker-compose on the same containers, and the ratios. */
function printCompose(c) {
  console.log(`compose: ${c.engines} container engines each; Docker Engine ${c.docker_engine}, ${c.compose}`);
  console.log("dockerd = CPU s of dockerd + containerd during the command (- when they are not found here)");
  console.log(["".padEnd(34), ...["wall s", "cpu s", "rss MB", "dockerd"].map((x) => x.padStart(8))].join(" "));
  const row = (name, s, extra = "") =>
    console.log(
      [
        name.padEnd(34),
        // the daemon's CPU is read in /proc's clock ticks: hundredths
        ...[
          f(s.wall_s),
          f(s.cpu_s),
          String(s.peak_rss_mb),
          s.daemon_cpu_s === undefined ? "" : f(s.daemon_cpu_s, 2),
        ].map((x) => x.padStart(8)),
        extra,
      ]
        .join(" ")
        .trimEnd(),
    );
  row("narwhal reconcile --once, cold", c.narwhal.cold, "(all captured)");
  row(
    "docker-compose up -d, cold",
    c.docker_compose.cold,
    `(all /health 200 after ${f(c.docker_compose.cold.ready_wall_s)} s)`,
  );
  row("narwhal reconcile --once, no-op", c.narwhal.noop);
  row("docker-compose up -d, no-op", c.docker_compose.noop);
  row("floor (node -e 0)", c.floor);
  const r = c.ratios;
  console.log(
    `no-op narwhal / docker-compose: cpu ${f(r.noop_cpu_narwhal_over_compose)}x (with dockerd's ${f(r.noop_cpu_with_daemon_narwhal_over_compose)}x), wall ${f(r.noop_wall_narwhal_over_compose)}x; ` +
      `over the floor: narwhal ${f(r.noop_cpu_narwhal_over_floor, 1)}x, docker-compose ${f(r.noop_cpu_compose_over_floor, 1)}x cpu; ` +
      `down: narwhal ${f(c.down.narwhal_wall_s, 1)} s, docker-compose ${f(c.down.compose_wall_s, 1)} s wall`,
  );
}

/** The scale part's rows: the no-op per fleet size, the fit, and what it projects for 1000 engines. */
function printScale(s) {
  console.log(
    `no-op reconcile --once by fleet size (native, every prefill paired with every decode${s.pool ? ` of its pool of ${s.pool}` : ""}):`,
  );
  for (const p of Object.values(s.sizes))
    console.log(
      `  ${String(p.engines).padStart(4)} engines, ${String(p.pairs).padStart(5)} pairs: cpu ${f(p.noop.cpu_s)} s, wall ${f(p.noop.wall_s)} s, rss ${p.noop.peak_rss_mb} MB (cold converge ${f(p.cold_converge_wall_s, 1)} s wall)` +
        (p.settled_watch
          ? `; settled watch: ${p.settled_watch.cpu_ms_per_resync} ms CPU per ${p.settled_watch.resync_ms / 1000} s resync (${f(p.settled_watch.per_engine_ms)} ms an engine)`
          : ""),
    );
  if (!s.fit) return console.log(`  fit: needs ${s.pool ? 2 : 3} or more sizes`);
  const j = s.projected_1000;
  const range = (r) => (r ? ` (${f(r[0], 1)}–${f(r[1], 1)} leaving one size out)` : "");
  if (s.pool)
    return console.log(
      `  fit: ${f(s.fit.fixed_s)} s + ${f(s.fit.per_engine_ms, 1)} ms per engine (its share of its pool's pairs included); ` +
        `projected for 1000 engines in pools of ${j.pool} (${j.pairs.toLocaleString("en")} pairs): ${f(j.cpu_s, 1)} s${range(j.cpu_s_leave_one_out)}`,
    );
  console.log(
    `  fit: ${f(s.fit.fixed_s)} s + ${f(s.fit.per_engine_ms, 1)} ms per engine + ${f(s.fit.per_pair_us, 1)} µs per pair` +
      `${s.fit.pair_term_dropped ? " (the free fit's pair cost was negative: fitted without it)" : ""}; ` +
      `projected for 1000 engines: ${f(j.one_pool_cpu_s, 1)} s in one pool (${j.one_pool_pairs.toLocaleString("en")} pairs)${range(j.one_pool_cpu_s_leave_one_out)}, ` +
      `${f(j.pools_of_16_cpu_s, 1)} s in pools of 16${range(j.pools_of_16_cpu_s_leave_one_out)}`,
  );
}
