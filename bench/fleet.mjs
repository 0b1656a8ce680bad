#!/usr/bin/env node
// The fleet benchmarks of issue 14, side by side in one run (after `npm run build`):
//
//   node bench/fleet.mjs [--parts sizes,noop,scale,watch,compose] [--sizes 10,100,1000] [--scale-sizes 16,24,32,48,64]
//                        [--scale-pool 16]
//                        [--runs 5] [--json FILE]
//
// sizes:   validate, plan and status of generated desired trees (bench/fleet-gen.mjs) of each size, against
//          a generated state of every engine captured (bench/fleet-state.mjs): wall, CPU, peak RSS.
// noop:    one P/D pair converged alone (the cold converge's baseline), then 16 native simulator engines
//          converged for real and the no-op `reconcile --once` against the floor (`node -e 0`: node's own
//          start, which no command avoids).
// scale:   native fleets of --scale-sizes converged for real, then each one's no-op `reconcile --once`: CPU per
//          size and a fit of what an engine and a P/D pair add (bench/fleet-scale.mjs).
// watch:   on the same 16 engines, a watch-mode controller; an editor's save of engine-launch.json → the
//          first persisted transition of the edited engine (fs.watch on the state directory).
// compose: 16 container engines (--noop-engines) converged by narwhal and the same 16 containers by
//          docker-compose, each on ports of its own: cold converge once each, then the no-op `reconcile --once`
//          against docker-compose's no-op `up -d` and the floor (bench/fleet-compose.mjs). Needs a Docker Engine
//          and docker-compose; skipped with one line saying why without them.
// Runs of the same part are interleaved (each size and the floor in turn), so a burst of load on the shared
// machine hits all of them alike; medians of --runs. Prints a table and writes JSON (default
// bench/results/<date>.json, or <date>-2.json, … after an earlier run of the day).
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { generateDesired } from "./fleet-gen.mjs";
import { writeFleetState } from "./fleet-state.mjs";
import { writeConvergedFleetState } from "./fleet-state-converged.mjs";
import { cleanEnv, measureNode, Samples, writeResult } from "./measure.mjs";
import { watchLatency } from "./fleet-watch.mjs";
import { convergedFleet, scaleBench } from "./fleet-scale.mjs";
import { machine, printTable } from "./fleet-report.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const PARTS = ["sizes", "noop", "scale", "watch", "compose"];
const { values } = parseArgs({
  options: {
    parts: { type: "string", default: PARTS.join(",") },
    sizes: { type: "string", default: "10,100,1000" },
    "scale-sizes": { type: "string", default: "16,24,32,48,64" },
    "scale-pool": { type: "string" },
    runs: { type: "string", default: "5" },
    json: { type: "string" },
    "noop-engines": { type: "string", default: "16" },
  },
});
const parts = new Set(values.parts.split(","));
for (const p of parts) if (!PARTS.includes(p)) throw new Error(`--parts: unknown part ${p}`);
const sizes = values.sizes.split(",").map(Number);
const runs = Number(values.runs);
const main = path.join(root, "dist/bundle/main.js"); // what `narwhal` runs (scripts/bundle.mjs)
await fs.access(main).catch(() => {
  throw new Error("dist/ is missing: run `npm run build` first");
});
const { loadDesired } = await import(path.join(root, "dist/src/desired/load.js"));
const env = cleanEnv();
const work = await fs.mkdtemp(path.join(await fs.realpath(os.tmpdir()), "narwhal-bench-fleet-"));
const cli = (...args) => [main, ...args];
const report = {
  at: new Date().toISOString(),
  machine: machine(),
  runs,
  sizes: {},
  sizes_converged: {},
  noop: null,
  scale: null,
  watch: null,
  compose: null,
};

// One live process every generated handle names: status checks it as it checks an engine's.
const holder = spawn("sleep", ["3600"], { stdio: "ignore" });
try {
  if (parts.has("sizes")) {
    const trees = [];
    for (const n of sizes) {
      const desired = await generateDesired(path.join(work, `desired-${n}`), { engines: n });
      const state = path.join(work, `state-${n}`);
      await writeFleetState(state, await loadDesired(desired), holder.pid);
      trees.push({ n, kind: "lower-bound", desired, state });
    }
    // The same trees against records a converged controller wrote (a real P/D pair's, cloned in pools).
    const pair = await convergedFleet({ main, env, work, n: 2, tag: "template" });
    try {
      const template = JSON.parse(await fs.readFile(path.join(pair.state, "narwhal.json"), "utf8"));
      for (const { n, desired } of [...trees]) {
        const state = path.join(work, `state-converged-${n}`);
        const written = await writeConvergedFleetState(state, await loadDesired(desired), template);
        trees.push({ n, kind: "converged", desired, state, written });
      }
      const commands = {
        validate: (t) => cli("validate", "--desired", t.desired),
        plan: (t) => cli("plan", "--desired", t.desired, "--state", t.state),
        status: (t) => cli("status", "--desired", t.desired, "--state", t.state),
      };
      // validate reads desired/ only: measured once per size, not per state.
      const measured = (t, name) => name !== "validate" || t.kind === "lower-bound";
      const samples = new Map();
      for (let i = 0; i < runs; i++)
        for (const t of trees)
          for (const [name, args] of Object.entries(commands)) {
            if (!measured(t, name)) continue;
            const key = `${name}\t${t.n}\t${t.kind}`;
            if (!samples.has(key)) samples.set(key, new Samples());
            // plan: 0 nothing to do, 2 changes pending; both are a measured plan.
            samples.get(key).add(measureNode(args(t), { env, okCodes: name === "plan" ? [0, 2] : [0] }));
          }
      for (const t of trees) {
        const rows = Object.keys(commands).filter((name) => measured(t, name));
        const summary = Object.fromEntries(
          rows.map((name) => [name, samples.get(`${name}\t${t.n}\t${t.kind}`).summary()]),
        );
        if (t.kind === "lower-bound") report.sizes[t.n] = summary;
        else
          report.sizes_converged[t.n] = {
            state_mb: Math.round(t.written.bytes / 1e4) / 100,
            proofs: t.written.proofs,
            ...summary,
          };
      }
    } finally {
      pair.down();
    }
  }

  if (parts.has("noop") || parts.has("watch")) {
    // The smallest P/D fleet first, alone on the machine: issue 14's cold converge of 16 engines is measured
    // against one engine's, and a P/D engine converges with its peer (its KV proof needs one).
    let unit = null;
    if (parts.has("noop")) {
      const pair = await convergedFleet({ main, env, work, n: 2, tag: "unit" });
      unit = pair.cold;
      pair.down();
    }
    const fleet = await convergedFleet({ main, env, work, n: Number(values["noop-engines"]), tag: "noop" });
    try {
      if (parts.has("noop")) {
        const floor = new Samples();
        const noop = new Samples();
        for (let i = 0; i < runs; i++) {
          floor.add(measureNode(["-e", "0"], { env }));
          noop.add(fleet.noop());
        }
        const f = floor.summary();
        const o = noop.summary();
        report.noop = {
          engines: fleet.n,
          cold_converge_wall_s: fleet.cold.wall,
          cold_converge_cpu_s: fleet.cold.cpu,
          pair_cold_converge_wall_s: unit.wall,
          pair_cold_converge_cpu_s: unit.cpu,
          floor: f,
          noop: o,
          cpu_over_floor: Math.round((o.cpu_s / f.cpu_s) * 100) / 100,
        };
      }
      if (parts.has("watch"))
        report.watch = await watchLatency({ main, desired: fleet.desired, state: fleet.state, env, runs });
    } finally {
      fleet.down();
    }
  }
  if (parts.has("scale")) {
    const scaleSizes = values["scale-sizes"].split(",").map(Number);
    const pool = values["scale-pool"] === undefined ? undefined : Number(values["scale-pool"]);
    // Refused before any fleet converges (a size the pool does not divide would fail after the ones before it).
    if (pool !== undefined && (!Number.isInteger(pool) || pool < 2 || pool % 2 !== 0))
      throw new Error(`--scale-pool ${values["scale-pool"]}: an even number of engines, 2 or more`);
    for (const n of scaleSizes)
      if (pool !== undefined && n % pool !== 0)
        throw new Error(`--scale-pool ${pool} does not divide --scale-sizes' ${n}`);
    report.scale = await scaleBench({ main, env, work, runs, sizes: scaleSizes, ...(pool ? { pool } : {}) });
  }
  if (parts.has("compose")) {
    // Loaded only here: it loads dockerode (the test setup's sim-image.mjs).
    const { composeBench } = await import("./fleet-compose.mjs");
    report.compose = await composeBench({ main, env, work, runs, engines: Number(values["noop-engines"]) });
  }
} finally {
  holder.kill();
  await fs.rm(work, { recursive: true, force: true });
}

printTable(report);
writeResult(report, { json: values.json, dir: path.join(root, "bench/results") });
