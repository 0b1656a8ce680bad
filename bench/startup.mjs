#!/usr/bin/env node
// CPU (user + sys) of commands that act on nothing, against the floor (`node -e 0`), and of importing
// each heavy module alone. Run after `npm run build`:
//
//   node bench/startup.mjs [--runs 7] [--base /other/checkout] [--json out.json]
//
// The JSON goes to bench/results/<date>-startup.json unless --json names a file (numbered after an earlier run).
//
// CPU, not wall time: the machine is shared and wall time lies. Runs are interleaved (floor, each
// command, each build in turn), so a burst of load hits all of them alike; medians of --runs.
// --base names another built checkout (its dist/) measured side by side, with the ratio base/this.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { cleanEnv, measureNode, median, writeResult } from "./measure.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "7" },
    base: { type: "string" },
    json: { type: "string" },
  },
});
const runs = Number(values.runs);
// The fleet benchmarks' plain environment: a caller's NODE_EXTRA_CA_CERTS alone (set on these machines) costs
// every node start 0.05 s of CPU, parsing the bundle of certificates, and would hide what narwhal costs.
const env = cleanEnv();
const desired = path.join(root, "desired"); // the repository's example: a native fleet
const state = fs.mkdtempSync(path.join(fs.realpathSync("/tmp"), "narwhal-bench-state-"));

// The bundle `narwhal` runs (scripts/bundle.mjs); a checkout from before the bundle has only dist/src.
const cli = (dir) =>
  [path.join(dir, "dist/bundle/main.js"), path.join(dir, "dist/src/cli/main.js")].find((f) => fs.existsSync(f));
// A process that imports one module: its CPU less the floor's is that module's load cost.
const bundled = (dir, file) =>
  fs.existsSync(path.join(dir, file)) ? ["-e", `require(${JSON.stringify(path.join(dir, file))})`] : null;
const importer = (...specs) => [
  "--input-type=module",
  "-e",
  specs.map((spec) => `await import(${JSON.stringify(spec)});`).join(" "),
];
const commands = [
  ["node -e 0 (the floor)", () => ["-e", "0"]],
  ["narwhal --help", (dir) => [cli(dir), "--help"]],
  ["narwhal engine --help", (dir) => [cli(dir), "engine", "--help"]],
  ["narwhal validate (native)", (dir) => [cli(dir), "validate", "--desired", desired]],
  ["narwhal status (empty state)", (dir) => [cli(dir), "status", "--desired", desired, "--state", state]],
  ...["dockerode", "zod", "winston", "xstate", "commander"].map((m) => [`import ${m}`, () => importer(m)]),
  // What the bundle's container backend requires instead (scripts/bundle.mjs); a build without it has no row.
  ["dockerode, the bundle's copy", (dir) => bundled(dir, "dist/bundle/dockerode.cjs")],
  // The least any reconcile loads (the required packages it validates, runs machines and logs with): a floor
  // of its own for issue 14's "no-op within 2x node's start".
  ["import zod + xstate + winston", () => importer("zod", "xstate", "winston")],
  ["import controller.js", (dir) => importer(pathToFileURL(path.join(dir, "dist/src/controller/controller.js")).href)],
];

const builds = [["this", root], ...(values.base ? [["base", path.resolve(values.base)]] : [])];
const samples = new Map();
for (let i = 0; i < runs; i++)
  for (const [name, args] of commands)
    for (const [build, dir] of builds) {
      const key = `${name}\t${build}`;
      if (!samples.has(key)) samples.set(key, { cpu: [], rss: [] });
      const argv = args(dir);
      if (!argv) continue;
      const s = measureNode(argv, { cwd: root, env }); // the kernel's rusage of the reaped child
      samples.get(key).cpu.push(s.cpu);
      samples.get(key).rss.push(s.rssMb);
    }

const floor = median(samples.get(`${commands[0][0]}\tthis`).cpu);
const rows = commands.map(([name]) => {
  const here = median(samples.get(`${name}\tthis`).cpu);
  const row = { command: name, cpu_s: here, rss_mb: median(samples.get(`${name}\tthis`).rss), x_floor: here / floor };
  if (values.base) {
    const base = median(samples.get(`${name}\tbase`).cpu);
    Object.assign(row, { base_cpu_s: base, base_over_this: base / here });
  }
  return row;
});

const fmt = (x, d = 3) => (x === undefined || !Number.isFinite(x) ? "" : x.toFixed(d));
console.log(`medians of ${runs} interleaved runs; CPU = user + sys seconds; floor ${fmt(floor)} s`);
console.log(
  ["command".padEnd(30), "cpu s", "x floor", "rss MB", ...(values.base ? ["base cpu s", "base/this"] : [])].join("\t"),
);
for (const r of rows)
  console.log(
    [
      r.command.padEnd(30),
      fmt(r.cpu_s),
      fmt(r.x_floor, 1),
      fmt(r.rss_mb, 0),
      ...(values.base ? [fmt(r.base_cpu_s), fmt(r.base_over_this, 1)] : []),
    ].join("\t"),
  );
const report = { at: new Date().toISOString(), node: process.version, runs, floor_cpu_s: floor, rows };
writeResult(report, { json: values.json, dir: path.join(root, "bench/results"), suffix: "-startup" });
fs.rmSync(state, { recursive: true, force: true });
