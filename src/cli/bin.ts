#!/usr/bin/env node
// The `narwhal` executable (dist/bundle/main.js, scripts/bundle.mjs): runs the CLI bundle beside it
// (cli.cjs, one CommonJS file) compiled with V8's code cache. Why: compiling the bundle's functions was
// about a third of a command's CPU (a no-op `reconcile --once` of 16 engines 0.57 → 0.42 s side by side),
// and node 20 caches the compilation of no module it loads itself (module.enableCompileCache is node 22).
//
// One cache file per top-level command (command-names.ts): V8 stores the functions compiled when the cache
// was made, and `--help` compiles few of those `reconcile` runs. A cache is made once, at the exit of a run
// that had none or whose cache V8 rejected (another node, other V8 flags), and never trusted blindly: its
// name holds a digest of the bundle's text, because V8's own check compares only the source's length, and a
// rebuilt bundle of the same length must not run the old one's bytecode. Caches live in code-cache/ beside
// the bundle, as trusted as the code itself; where that is not writable (a global install run by another
// user) each run compiles as it would without one, and says nothing: the cache changes speed, not behaviour.
import { isAscii } from "node:buffer";
import { createHash } from "node:crypto";
import fs from "node:fs";
import Module, { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import vm from "node:vm";
import { TOP_LEVEL_COMMANDS } from "./command-names.js";

const dir = path.dirname(fileURLToPath(import.meta.url));
const bundle = path.join(dir, "cli.cjs");
const cacheDir = path.join(dir, "code-cache");

/** The cache of this bundle, node and command (files of other bundles' digests are stale: pruned on write). */
function cacheName(bytes: Buffer, argv: string[]): { digest: string; file: string } {
  const digest = createHash("sha256").update(bytes).digest("hex").slice(0, 20);
  const command = argv.find((a) => (TOP_LEVEL_COMMANDS as readonly string[]).includes(a)) ?? "narwhal";
  const file = path.join(cacheDir, `${digest}-${process.version}-${process.arch}-${command}.bin`);
  return { digest, file };
}

function readCache(file: string): Buffer | undefined {
  try {
    return fs.readFileSync(file);
  } catch {
    return undefined; // none yet (or unreadable): compiled without
  }
}

/**
 * Writes the cache whole or not at all (temp file, rename: runs at once never read half a file). The temp file
 * is made before the cache is serialised: where nothing can be written, no run pays for serialising it.
 */
function writeCache(file: string, digest: string, script: vm.Script): void {
  const temp = `${file}.${process.pid}.tmp`;
  try {
    fs.mkdirSync(cacheDir, { recursive: true });
    const fd = fs.openSync(temp, "wx", 0o644);
    try {
      fs.writeFileSync(fd, script.createCachedData());
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, file);
    for (const other of fs.readdirSync(cacheDir))
      if (!other.startsWith(`${digest}-`)) fs.rmSync(path.join(cacheDir, other), { force: true });
  } catch {
    // Not writable here: the next run compiles without, as this one did.
    try {
      fs.rmSync(temp, { force: true });
    } catch {
      // no temp file either (its directory could not be made)
    }
  }
}

// bundle.mjs writes the bundle in ASCII: decoded as latin1 it is the same text, in a third of utf8's time (7 → 2 ms),
// and V8 keeps it one byte a character.
const bytes = fs.readFileSync(bundle);
const source = isAscii(bytes) ? bytes.toString("latin1") : bytes.toString("utf8");
const { digest, file } = cacheName(bytes, process.argv.slice(2));
const cachedData = readCache(file);
const script = new vm.Script(Module.wrap(source), { filename: bundle, cachedData });
if (cachedData === undefined || script.cachedDataRejected === true)
  process.once("exit", () => writeCache(file, digest, script));
const cli = new Module(bundle);
cli.filename = bundle;
(script.runInThisContext() as (...args: unknown[]) => void).call(
  cli.exports,
  cli.exports,
  createRequire(bundle),
  cli,
  bundle,
  dir,
);
