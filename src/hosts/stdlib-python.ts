// How narwhal runs its own Python helpers on a node (the bind test, the model manifest, the process-table
// scans over ssh, the attestation sidecar): each needs only the standard library, so each runs isolated
// (-I: no PYTHON* variables, no user site directory, not the script's directory on sys.path) and without
// the site module (-S: no site-packages, and none of their .pth files runs). What the node's Python
// environment holds cannot change what a helper concludes or serves (a json.py on PYTHONPATH shadowed the
// standard library's), and a helper starts in a fraction of the time where .pth files import packages
// at every start (this machine's pyenv imports certifi: 0.09 against 0.01 s of CPU per start).
//
// The interpreter is the node's `python3`, looked up once per node (HelperPython; one lookup for every node
// record of the controller's own machine): where `python3` is a version manager's shim (pyenv's is a bash
// script that runs some 20 processes, 0.15–0.4 s of CPU, before it execs the interpreter), every helper paid
// that again, and a cold converge of 16 container engines ran 32 helpers through it (16.4 -> 11.1 s of CPU
// once looked up). The lookup asks `python3` for sys.executable and takes that path only after it ran
// directly and named itself, so the same interpreter runs either way. The answer is kept under the state
// directory (HelperPythonMemo) for the next command: over ssh the lookup is two commands on the node, and on
// the controller's own machine a no-op that scans a busy machine's processes by a helper (local-scan.ts) ran it.
import fs from "node:fs/promises";
import path, { isAbsolute } from "node:path";
import { writeFileAtomic } from "../state/atomic-file.js";
import { IoError } from "../errors.js";
import type { HostAccess, RunOptions, RunResult, SpawnDetachedOptions } from "./types.js";

/** The interpreter's flags for every helper. */
export const STDLIB_FLAGS = ["-I", "-S"] as const;
/** A helper's interpreter as the node's PATH names it. */
export const PYTHON3 = "python3";
export const STDLIB_PYTHON = [PYTHON3, ...STDLIB_FLAGS] as const;

/** What a helper imports, so an interpreter that runs directly but lacks its libraries is not taken. */
const PROBE = "import sys, os, json, hashlib, socket; sys.stdout.write(sys.executable)";
const PROBE_TIMEOUT_MS = 30_000;

/** Runs argv on the node and reports the outcome (HostAccess.run). */
export type RunOnNode = (argv: string[], opts: { timeoutMs: number }) => Promise<RunResult>;

/**
 * Where a lookup's answer outlives this process (SshHost: a file under the state directory), so each CLI
 * run on a node does not look again: over ssh the lookup is two commands on the node, two ssh clients on the
 * controller, at every `reconcile --once`. What it read is used as a lookup's answer; an interpreter that
 * can no longer be executed is looked up again (withHelperPython) and the new answer kept.
 */
export interface HelperPythonMemo {
  read(): Promise<string | null>;
  write(exe: string): Promise<void>;
}

/** A memo in a file of the controller's (created 0600, its directory 0700). */
export function memoInFile(file: string): HelperPythonMemo {
  return {
    read: () => fs.readFile(file, "utf8"),
    write: async (exe) => {
      await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
      await writeFileAtomic(file, exe);
    },
  };
}

/** An answer a lookup can give: an absolute path on one line. */
const usable = (exe: string | null): exe is string => exe !== null && isAbsolute(exe) && !/[\n\r]/.test(exe);

/**
 * The node's python3 for narwhal's helpers, looked up once: the path the interpreter
 * reports of itself when that path runs it directly, else `python3` (a lookup that failed is asked
 * again next time; a `python3` whose own path does not run it stays `python3`).
 */
export class HelperPython {
  private resolving: Promise<string> | undefined;
  /** What the last lookup found. */
  private resolved: string | undefined;
  /** The memo's answer failed to execute: look up, not read it again. */
  private memoFailed = false;

  constructor(
    private readonly run: RunOnNode,
    private readonly memo?: HelperPythonMemo,
  ) {}

  /** The interpreter to run a helper with: an absolute path, or `python3` (the node's PATH looks it up). */
  interpreter(): Promise<string> {
    this.resolving ??= this.resolve();
    return this.resolving;
  }

  /** `exe` could not be executed (removed or replaced since): the next helper looks `python3` up again. */
  forget(exe: string): void {
    if (exe !== PYTHON3 && this.resolved === exe) {
      this.resolving = undefined;
      this.resolved = undefined;
      this.memoFailed = true;
    }
  }

  private async resolve(): Promise<string> {
    if (this.memo && !this.memoFailed) {
      const kept = await this.memo.read().catch(() => null);
      if (usable(kept)) return (this.resolved = kept);
    }
    const said = async (exe: string): Promise<string | null> => {
      const r = await this.run([exe, ...STDLIB_FLAGS, "-c", PROBE], { timeoutMs: PROBE_TIMEOUT_MS }).catch(() => null);
      return r?.code === 0 ? r.stdout : null;
    };
    const exe = await said(PYTHON3);
    if (!usable(exe)) {
      // No answer: not remembered, so a python3 installed later is found; the helper's own run reports it.
      this.resolving = undefined;
      return PYTHON3;
    }
    this.resolved = (await said(exe)) === exe ? exe : PYTHON3;
    // python3 itself is kept too: a memo that names no path is looked up again, not taken.
    await this.memo?.write(this.resolved).catch(() => undefined);
    this.memoFailed = false;
    return this.resolved;
  }
}

/**
 * `use` the node's helper interpreter; when one looked up earlier can no longer be executed (an upgrade
 * removed it: the run's exit is a shell's 126 or 127, nothing ran), look `python3` up again and use
 * that once more.
 */
export async function withHelperPython<R extends { code: number | null }>(
  python: HelperPython,
  use: (exe: string) => Promise<R>,
): Promise<R> {
  const exe = await python.interpreter();
  const r = await use(exe);
  if (exe === PYTHON3 || (r.code !== 126 && r.code !== 127)) return r;
  python.forget(exe);
  return use(await python.interpreter());
}

/** Run a helper on the node: `args` follow the interpreter and its flags. */
export const runHelper = (host: HostAccess, args: string[], opts: RunOptions = {}): Promise<RunResult> =>
  withHelperPython(host.helperPython, (exe) => host.run([exe, ...STDLIB_FLAGS, ...args], opts));

/** spawnDetached of a helper (its failure to execute is an IoError of syscall spawn, ENOENT or EACCES). */
export async function spawnHelper(
  host: HostAccess,
  args: string[],
  opts: SpawnDetachedOptions,
): Promise<{ pid: number }> {
  const r = await withHelperPython(host.helperPython, (exe) =>
    host.spawnDetached([exe, ...STDLIB_FLAGS, ...args], opts).then(
      ({ pid }) => ({ code: 0, pid }),
      (err: unknown) => {
        const gone = err instanceof IoError && err.path === exe && ["ENOENT", "EACCES"].includes(err.code);
        return { code: gone ? 127 : null, err };
      },
    ),
  );
  if ("err" in r) throw r.err;
  return { pid: r.pid };
}
