#!/usr/bin/env node
// Bundles the command line (src/cli/main.ts) into dist/bundle/: narwhal's own modules and its
// dependencies as a few ES module chunks, each command's body in chunks of its own that load when
// it runs (dynamic imports stay split). Why: a CLI process spent about a third of its CPU resolving
// and compiling some 400 module files (zod, winston and commander are many small files each); one
// `narwhal --help` took 0.67 s of CPU from dist/src and 0.40 s bundled, `validate` 0.70 s and
// 0.48 s (side by side, this 2-core machine). dist/src (tsc) stays the type-checked build;
// the bundle is what `narwhal` runs. dist/bundle/meta.json (esbuild's metafile) says which source
// files each chunk holds: test/e2e/lazy-loading.test.ts reads it to tell what a command loaded.
import { build } from "esbuild";
import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const BUNDLE_DIR = path.join(root, "dist/bundle");

export async function bundle({ outdir = BUNDLE_DIR } = {}) {
  await fs.rm(outdir, { recursive: true, force: true });
  const result = await build({
    absWorkingDir: root,
    entryPoints: { main: "src/cli/main.ts" },
    outdir,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    sourcemap: "linked",
    metafile: true,
    logLevel: "warning",
    // dockerode is required at run time by src/backends/container.ts (createRequire: loaded by the first
    // Docker client only), and its ssh stack has optional native addons a bundle cannot hold.
    external: ["dockerode", "ssh2", "cpu-features"],
    // CommonJS dependencies (winston, logform) require node's built-ins: give each chunk a real require.
    banner: {
      js: "import { createRequire as __narwhalRequire } from 'node:module'; const require = __narwhalRequire(import.meta.url);",
    },
  });
  await fs.writeFile(path.join(outdir, "meta.json"), JSON.stringify(result.metafile));
  await fs.chmod(path.join(outdir, "main.js"), 0o755);
  return result;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await bundle();
