#!/usr/bin/env node
// Times the model manifest (src/phases/host/model_manifest.py through a
// LocalHost, as inspect runs it) on a generated multi-GB checkpoint: once with
// an empty digest cache (cold: every byte hashed) and once more with nothing
// changed (warm: one stat per file). Run after `npm run build`:
//
//   node bench/model-manifest.mjs [--gib 4] [--files 8] [--dir /path/with/space]
//
// The files are written just before the cold run, so they are in the page
// cache: cold measures hashing, not the disk (dropping the page cache needs
// root and slows every other user of the machine).
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    gib: { type: "string", default: "4" },
    files: { type: "string", default: "8" },
    dir: { type: "string", default: os.tmpdir() },
  },
});
const gib = Number(values.gib);
const count = Number(values.files);

const { modelManifest } = await import(path.join(root, "dist/src/phases/host/model-manifest.js")).catch(() => {
  throw new Error("dist/ is missing or stale: run `npm run build` first");
});
const { LocalHost } = await import(path.join(root, "dist/src/hosts/local.js"));

const work = await fs.mkdtemp(path.join(values.dir, "narwhal-bench-manifest-"));
try {
  const model = path.join(work, "model");
  await fs.mkdir(model);
  await fs.writeFile(path.join(model, "config.json"), JSON.stringify({ model_type: "llama" }));
  // Shards of random bytes (one 16 MiB block repeated: sha256 reads every byte either way).
  const block = randomBytes(16 * 1024 * 1024);
  const perFile = Math.round((gib * 1024 ** 3) / count / block.length);
  for (let i = 1; i <= count; i++) {
    const handle = await fs.open(path.join(model, `model-${String(i).padStart(5, "0")}.safetensors`), "w");
    for (let b = 0; b < perFile; b++) await handle.write(block);
    await handle.close();
  }
  const bytes = count * perFile * block.length;
  const host = new LocalHost("bench", { PATH: "/usr/local/bin:/usr/bin:/bin" });
  const cacheDir = path.join(work, "cache");
  const timed = async () => {
    const t0 = process.hrtime.bigint();
    const r = await modelManifest(host, model, { signal: new AbortController().signal, cacheDir });
    return { ms: Number(process.hrtime.bigint() - t0) / 1e6, hashed: r.hashed, tree: r.manifest.tree_sha256 };
  };
  const cold = await timed();
  const warm = await timed();
  if (cold.tree !== warm.tree) throw new Error("warm tree digest differs from cold");
  console.log(
    JSON.stringify(
      {
        bytes,
        files: count + 1,
        cold_ms: Math.round(cold.ms),
        cold_hashed: cold.hashed,
        cold_gib_per_s: Number((bytes / 1024 ** 3 / (cold.ms / 1000)).toFixed(2)),
        warm_ms: Math.round(warm.ms),
        warm_hashed: warm.hashed,
        ratio: Math.round(cold.ms / warm.ms),
        machine: {
          cpu: os.cpus()[0]?.model ?? "unknown",
          cores: os.availableParallelism(),
          python: execFileSync("python3", ["--version"], { encoding: "utf8" }).trim(),
          node: process.version,
        },
      },
      null,
      2,
    ),
  );
} finally {
  await fs.rm(work, { recursive: true, force: true });
}
