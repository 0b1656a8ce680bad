#!/usr/bin/env node
// Bundles the command line into dist/bundle/: cli.cjs, narwhal's own modules and its dependencies as one
// CommonJS file (src/cli/main.ts and all it imports), run by main.js (src/cli/bin.ts, the `narwhal`
// executable) through V8's code cache. Why one file: a CLI process spent about a third of its CPU resolving
// and compiling some 400 module files (zod, winston and commander are many small files each; --help 0.67 s
// from dist/src, 0.40 s bundled, this 2-core machine), and what is left of compiling one file V8 caches
// (bin.ts). A command still evaluates only what it runs: esbuild wraps each module reached through a dynamic
// import in a function called at that import (xstate and the controller, the engine actions, chokidar, ...).
// dist/src (tsc) stays the type-checked build. dist/bundle/meta.json (esbuild's metafile) says which source
// files each output holds: test/e2e/lazy-loading.test.ts reads it with V8's coverage of cli.cjs to tell what a
// command evaluated, test/bundle-fresh.ts to refuse a stale bundle.
import { build, transform } from "esbuild";
import fs from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const BUNDLE_DIR = path.join(root, "dist/bundle");

export async function bundle({ outdir = BUNDLE_DIR } = {}) {
  await fs.rm(outdir, { recursive: true, force: true });
  const cli = await build({
    absWorkingDir: root,
    entryPoints: { cli: "src/cli/main.ts" },
    outdir,
    outExtension: { ".js": ".cjs" },
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    // An import() of node's own modules (node:https) becomes a require: bin.ts compiles the bundle as a
    // vm.Script, which has no loader for import().
    supported: { "dynamic-import": false },
    sourcemap: "linked",
    metafile: true,
    logLevel: "warning",
    // dockerode is required at run time by src/backends/container.ts (createRequire: loaded by the first
    // Docker client only), from the bundle of its own below.
    external: ["dockerode"],
    define: {
      NARWHAL_BUNDLED_DOCKERODE: JSON.stringify(`./${DOCKERODE_FILE}`),
      NARWHAL_BUNDLE_ENTRY: "true",
      // Where the sources ask where they are (the package root, a require beside them): the bundle's file.
      "import.meta.url": "__narwhalUrl",
      // The one reader is @dabh/diagnostics (winston's debug channel, DEBUG=winston:*), whose development build
      // loads a colour stack (colorspace, kuler, ...) at winston's first require: ~3 ms of every command that
      // logs (a no-op of 16 engines, this 2-core machine). Its production build, chosen here, is its no-op.
      "process.env.NODE_ENV": JSON.stringify("production"),
    },
    // Strict, as the ES modules it is made of were: esbuild's own "use strict" comes after a banner, too late.
    banner: { js: "\"use strict\"; var __narwhalUrl = require('node:url').pathToFileURL(__filename).href;" },
  });
  await asciiComments(path.join(outdir, "cli.cjs"));
  const bin = await build({
    absWorkingDir: root,
    entryPoints: { main: "src/cli/bin.ts" },
    outdir,
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    metafile: true,
    logLevel: "warning",
  });
  const docker = await bundleDockerode(outdir);
  // One metafile of the three builds, of files only (the stubs are no source file: test/bundle-fresh.ts stats each).
  const files = (inputs) => Object.fromEntries(Object.entries(inputs).filter(([k]) => !k.startsWith(`${STUBS}:`)));
  const builds = [cli, bin, docker].map((b) => b.metafile);
  const outputs = Object.assign({}, ...builds.map((m) => m.outputs));
  const metafile = {
    inputs: files(Object.assign({}, ...builds.map((m) => m.inputs))),
    outputs: Object.fromEntries(Object.entries(outputs).map(([k, o]) => [k, { ...o, inputs: files(o.inputs) }])),
  };
  await fs.writeFile(path.join(outdir, "meta.json"), JSON.stringify(metafile));
  await fs.chmod(path.join(outdir, "main.js"), 0o755);
  return cli;
}

/**
 * esbuild writes most strings and regular expressions in ASCII (charset: "ascii") but keeps some comments as they
 * are (an em dash, a section sign): each character outside ASCII becomes "?" (as many as its UTF-16 units, so
 * the source map's columns hold), and the bundle is ASCII, which bin.ts decodes in a third of utf8's time. Not
 * all of them are comments (esbuild leaves a tagged template's raw text and a /u regular expression as written):
 * the bundle without its comments must be the same before and after, or the build stops and nothing changes.
 */
export async function asciiComments(file) {
  const text = await fs.readFile(file, "utf8");
  const ascii = text.replace(/[^\x00-\x7f]/gu, (c) => "?".repeat(c.length));
  if (ascii === text) return;
  const code = async (js) =>
    (await transform(js, { loader: "js", minifyWhitespace: true, legalComments: "none", charset: "utf8" })).code;
  if ((await code(ascii)) !== (await code(text)))
    throw new Error(
      `${file}: a character outside ASCII is in code, not only in comments (a tagged template or a /u regular expression?): bin.ts reads the bundle as utf8 then; remove this check's replacement or the character`,
    );
  await fs.writeFile(file, ascii);
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
