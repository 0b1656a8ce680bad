#!/usr/bin/env node
// One plan's cost while a change rolls through fleets of --sizes engines (bench/plan-rollout.ts):
//
//   node bench/plan-rollout.mjs [--sizes 100,1000] [--runs 5] [--json FILE]
//
// plan() is pure, so it runs in this process, compiled from src/ and the planner tests' fixtures by
// esbuild (narwhal's bundler) into a temporary file. Prints medians in ms and each plan's digest
// (equal digests across builds: the same plan), and writes JSON (default bench/results/<date>-plan-rollout.json, numbered after an earlier run of the day).
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { build } from "esbuild";
import { machine } from "./fleet-report.mjs";
import { writeResult } from "./measure.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    sizes: { type: "string", default: "100,1000" },
    runs: { type: "string", default: "5" },
    json: { type: "string" },
  },
});
const dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-bench-plan-"));
try {
  const outfile = path.join(dir, "plan-rollout.mjs");
  await build({
    entryPoints: [path.join(root, "bench/plan-rollout.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile,
    logLevel: "warning",
  });
  const { planRollout } = await import(pathToFileURL(outfile).href);
  const rows = planRollout(values.sizes.split(",").map(Number), Number(values.runs));
  console.log(`one plan, medians of ${values.runs} (ms); every engine captured, every compatible pair proven`);
  for (const r of rows)
    console.log(
      `${r.shape.padEnd(9)} ${String(r.engines).padStart(5)}  ${r.case.padEnd(40)} ${String(r.median_ms).padStart(8)} ms  ${r.actions} actions  plan ${r.plan_sha}`,
    );
  const report = { at: new Date().toISOString(), machine: machine(), runs: Number(values.runs), rows };
  writeResult(report, { json: values.json, dir: path.join(root, "bench/results"), suffix: "-plan-rollout" });
} finally {
  await fs.rm(dir, { recursive: true, force: true });
}
