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
import { createRequire } from "node:module";
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
    // Docker client only), from the bundle of its own below.
    external: ["dockerode"],
    define: { NARWHAL_BUNDLED_DOCKERODE: JSON.stringify(`./${DOCKERODE_FILE}`) },
    // CommonJS dependencies (winston, logform) require node's built-ins: give each chunk a real require.
    banner: {
      js: "import { createRequire as __narwhalRequire } from 'node:module'; const require = __narwhalRequire(import.meta.url);",
    },
  });
  const docker = await bundleDockerode(outdir);
  // One metafile of both builds, of files only (the stubs are no source file: test/bundle-fresh.ts stats each).
  const files = (inputs) => Object.fromEntries(Object.entries(inputs).filter(([k]) => !k.startsWith(`${STUBS}:`)));
  const outputs = { ...result.metafile.outputs, ...docker.metafile.outputs };
  const metafile = {
    inputs: files({ ...result.metafile.inputs, ...docker.metafile.inputs }),
    outputs: Object.fromEntries(Object.entries(outputs).map(([k, o]) => [k, { ...o, inputs: files(o.inputs) }])),
  };
  await fs.writeFile(path.join(outdir, "meta.json"), JSON.stringify(metafile));
  await fs.chmod(path.join(outdir, "main.js"), 0o755);
  return result;
}

const DOCKERODE_FILE = "dockerode.cjs";

// dockerode's own modules that narwhal never reaches, each with what it would have needed: docker-modem's
// ssh:// transport (ssh2, with its crypto; narwhal dials a ssh:// endpoint through OpenSSH, docker-ssh.ts,
// and hands docker-modem plain HTTP over that agent) and dockerode's BuildKit session and protocol (gRPC and
// protobuf, for buildImage's version 2 only; narwhal builds no image). Loading them cost every container
// command more than a tenth of a second of CPU.
const NOT_BUNDLED = [
  { module: "./ssh", importer: "/docker-modem/lib/", instead: "docker-modem's ssh:// transport (ssh2)" },
  { module: "./session", importer: "/dockerode/lib/", instead: "dockerode's BuildKit session (gRPC)" },
  { module: "./buildkit", importer: "/dockerode/lib/", instead: "dockerode's BuildKit protocol (protobuf)" },
];

const STUBS = "narwhal-not-bundled";

/** Where dockerode and its dependencies stop being resolved: a stub that says so if it is ever called. */
const notBundled = {
  name: STUBS,
  setup(b) {
    const names = NOT_BUNDLED.map((n) => n.module.replace(/^\.\//, "")).join("|");
    b.onResolve({ filter: new RegExp(`^\\./(${names})$`) }, (args) => {
      const hit = NOT_BUNDLED.find((n) => n.module === args.path && args.importer.includes(n.importer));
      return hit ? { path: hit.instead, namespace: STUBS } : undefined;
    });
    b.onLoad({ filter: /.*/, namespace: STUBS }, (args) => ({
      contents:
        "module.exports = function () { throw new Error(" +
        JSON.stringify(`${args.path} is not in narwhal's bundle (scripts/bundle.mjs): narwhal never uses it`) +
        "); };",
      loader: "js",
    }));
  },
};

/**
 * dockerode as one CommonJS file (dist/bundle/dockerode.cjs), without the modules NOT_BUNDLED names: the
 * bundle's container backend requires it instead of the package (0.02 s of CPU to load over node's start,
 * against 0.19 s from node_modules).
 */
async function bundleDockerode(outdir) {
  return build({
    absWorkingDir: root,
    entryPoints: [createRequire(path.join(root, "package.json")).resolve("dockerode")],
    outfile: path.join(outdir, DOCKERODE_FILE),
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    sourcemap: "linked",
    metafile: true,
    logLevel: "warning",
    plugins: [notBundled],
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await bundle();
