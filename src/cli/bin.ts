#!/usr/bin/env node
// The `narwhal` executable (dist/bundle/main.js, scripts/bundle.mjs): runs the CLI bundle beside it
// (cli.cjs, one CommonJS file) compiled with V8's code cache. Why: compiling the bundle's functions was
// about a third of a command's CPU (a no-op `reconcile --once` of 16 engines 0.57 → 0.42 s side by side),
// and node 20 caches the compilation of no module it loads itself (module.enableCompileCache is node 22).
//
// One cache file per top-level command (command-names.ts): V8 stores the functions compiled when the cache
// was made, and `--help` compiles few of those `reconcile` runs. A cache is made once, at the exit of a run
// that had none or whose cache V8 rejected, when the run did its command's work (representative()); a run
// that ran engine steps (ran-steps.ts) makes one of its own kind, used only until a run that ran none comes
// (weighed()). A cache is never trusted blindly: its name holds a digest of the bundle's text, because V8's
// own check compares only the source's length, and a rebuilt bundle of the same length must not run the old
// one's bytecode. Node 20 maps no stack trace of a vm.Script through its source map (--enable-source-maps
// included): an internal error's stack names lines of cli.cjs, which cli.cjs.map maps by hand. Caches live in
// code-cache/ beside the bundle, as trusted as the code itself; where that is not writable (a global install
// run by another user) each run compiles as it would without one, and says nothing: the cache changes speed,
// not behaviour.
import { isAscii } from "node:buffer";
import { createHash } from "node:crypto";
import fs from "node:fs";
import Module, { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { cachedDataVersionTag } from "node:v8";
import vm from "node:vm";
import { TOP_LEVEL_COMMANDS } from "./command-names.js";
import { RAN_STEPS_EVENT } from "./ran-steps.js";

const dir = path.dirname(fileURLToPath(import.meta.url));
const bundle = path.join(dir, "cli.cjs");
const cacheDir = path.join(dir, "code-cache");

/**
 * The cache of this bundle, V8 and command. V8's tag covers its version and the flags that decide whether it
 * takes a cache (--max-old-space-size, --jitless...): runs with and without such a flag keep a cache each
 * instead of rejecting and rewriting each other's. Files of other bundles' digests are stale: pruned on write.
 */
function cacheName(bytes: Buffer, argv: string[]): { digest: string; files: Files; command: string } {
  const digest = createHash("sha256").update(bytes).digest("hex").slice(0, 20);
  const command = argv.find((a) => (TOP_LEVEL_COMMANDS as readonly string[]).includes(a)) ?? "narwhal";
  const base = path.join(cacheDir, `${digest}-${process.version}-${process.arch}-${cachedDataVersionTag()}-${command}`);
  return { digest, command, files: { light: `${base}.bin`, steps: `${base}.steps.bin` } };
}

/** A command's two caches: made by a run that ran no engine steps, and by one that did. */
type Files = Record<"light" | "steps", string>;

/**
 * What the exit of a representative run does with the caches: `loaded` is the one V8 took (none: none was
 * there, or V8 rejected it). A run without one makes its own kind. A light run that took the steps cache makes
 * none (its functions would carry every step's deserialised ones) but removes it, so that the next run compiles
 * and, if light, makes the light cache, which every later run takes first. A light cache makes the steps one
 * dead: removed.
 */
function weighed(loaded: keyof Files | undefined, ran: keyof Files): { write?: keyof Files; remove?: keyof Files } {
  if (loaded === undefined) return ran === "light" ? { write: "light", remove: "steps" } : { write: "steps" };
  return loaded === "steps" && ran === "light" ? { remove: "steps" } : {};
}

/**
 * Whether this run's compiled functions stand for its command: it did its work (exit 0, or 2: not converged,
 * changes pending) and was not a request for help or the version (which compiles little of a command; the
 * cache of no command is the one of --help and --version). A cache is never rewritten once V8 takes it.
 */
function representative(code: number, argv: string[], command: string): boolean {
  if (code !== 0 && code !== 2) return false;
  return command === "narwhal" || !argv.some((a) => ["--help", "-h", "help", "--version", "-V"].includes(a));
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
  let made = false;
  try {
    fs.mkdirSync(cacheDir, { recursive: true });
    const fd = fs.openSync(temp, "wx", 0o644);
    made = true;
    try {
      fs.writeFileSync(fd, script.createCachedData());
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, file);
    made = false;
    prune(digest);
  } catch {
    // Not writable here (or another process's temp file of this pid: a shared install in containers): the
    // next run compiles without, as this one did. Only a temp file this process made is removed.
    if (made) fs.rmSync(temp, { force: true });
  }
}

function removeCache(file: string): void {
  try {
    fs.rmSync(file, { force: true });
  } catch {
    // Not writable here: the cache stays what it was, as fast as it was.
  }
}

/** Caches of other bundles, and temp files a killed writer left (older than a minute: no writer is that slow). */
function prune(digest: string): void {
  const now = Date.now();
  for (const other of fs.readdirSync(cacheDir)) {
    const file = path.join(cacheDir, other);
    const stale =
      !other.startsWith(`${digest}-`) || (other.endsWith(".tmp") && now - fs.statSync(file).mtimeMs > 60_000);
    if (stale) fs.rmSync(file, { force: true });
  }
}

// bundle.mjs writes the bundle in ASCII: decoded as latin1 it is the same text, in a third of utf8's time (7 → 2 ms),
// and V8 keeps it one byte a character.
const bytes = fs.readFileSync(bundle);
const source = isAscii(bytes) ? bytes.toString("latin1") : bytes.toString("utf8");
const argv = process.argv.slice(2);
const { digest, files, command } = cacheName(bytes, argv);
const lightData = readCache(files.light);
const cachedData = lightData ?? readCache(files.steps);
const script = new vm.Script(Module.wrap(source), { filename: bundle, cachedData });
const loaded =
  cachedData === undefined || script.cachedDataRejected === true ? undefined : lightData ? "light" : "steps";
if (loaded !== "light") {
  let ran: keyof Files = "light";
  process.once(RAN_STEPS_EVENT, () => {
    ran = "steps";
  });
  process.once("exit", (code) => {
    if (!representative(code, argv, command)) return;
    const { write, remove } = weighed(loaded, ran);
    if (write) writeCache(files[write], digest, script);
    if (remove) removeCache(files[remove]);
  });
}
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
