// Which run directories `narwhal prune` (and watch mode) may remove: beyond the
// newest `keep` per engine, and never one the state still points to — the run
// the engine serves from or is being prepared or started in (record, handle,
// machine snapshot, the retiring engine it replaces), the one its last error
// names (a failed start's evidence and kept container), or one a KV proof names.
// Pure: the caller lists the directories and reads the state, and acts on the result.
import path from "node:path";
import type { EngineRecord, StateFile } from "./store.js";

/** `<utc-stamp>-<hash8>` or `<utc-stamp>-<hash8>-<n>` (run-dir.ts createRunDir). */
const RUN_NAME = /^(\d{8}T\d{6}Z)-([0-9a-f]{8})(?:-(\d+))?$/;

export type KeepReason = "newest" | "referenced";

export interface RunVerdict {
  name: string;
  /** Why it stays, or null when it goes. */
  keep: { reason: KeepReason; why: string } | null;
}

export interface EngineRetention {
  engine: string;
  runs: RunVerdict[];
  /** Entries that are not run directories narwhal made (left alone). */
  foreign: string[];
}

/** Newest first: by stamp, then the retry suffix (a later retry of one second is newer). */
function newestFirst(a: RegExpExecArray, b: RegExpExecArray): number {
  if (a[1] !== b[1]) return (a[1] as string) < (b[1] as string) ? 1 : -1;
  return Number(b[3] ?? 1) - Number(a[3] ?? 1);
}

/** The parts of a record that point at runs the engine still needs, each with what it is. */
function pointers(record: EngineRecord | undefined): Array<[string, unknown]> {
  if (!record) return [];
  return [
    ["the engine's current plan (run_dir)", record.run_dir],
    ["the engine's live process or container", record.handle],
    ["the engine's machine (prepared, checked or started in it, or the engine it replaces)", record.snapshot],
    ["the engine's last error", record.last_error],
  ];
}

/** Whether `text` names the run directory `dir` (and not merely a longer name starting with it). */
function names(text: string, dir: string): boolean {
  for (let at = text.indexOf(dir); at >= 0; at = text.indexOf(dir, at + 1)) {
    const next = text.charAt(at + dir.length);
    if (!/[A-Za-z0-9_-]/.test(next)) return true;
  }
  return false;
}

/**
 * The run directories the KV proofs name (each end's run_dir, and the directory of a file named
 * instead), for every engine at once: searching the whole proofs map's text for each run of each
 * engine was O(engines x proofs) per prune, which watch mode runs at every resync once settled
 * (1.5 s of CPU in 50 s at 64 engines and 1024 proofs: three quarters of a settled controller's).
 */
export function proofRunDirs(proofs: StateFile["proofs"]): Set<string> {
  const dirs = new Set<string>();
  for (const p of Object.values(proofs ?? {})) {
    for (const end of [p.prefill, p.decode]) {
      if (typeof end?.run_dir !== "string") continue;
      dirs.add(end.run_dir);
      dirs.add(path.dirname(end.run_dir));
    }
  }
  return dirs;
}

/**
 * The verdict for every entry of one engine's runs root (`root`, holding `entries`):
 * the newest `keep` stay, and older ones the state still points to. `proofDirs`: proofRunDirs of
 * the state's proofs, computed once by a caller that decides for many engines.
 */
export function decideRetention(
  engine: string,
  root: string,
  entries: readonly string[],
  keep: number,
  state: Pick<StateFile, "engines" | "proofs">,
  proofDirs: ReadonlySet<string> = proofRunDirs(state.proofs),
): EngineRetention {
  const refs = pointers(state.engines[engine]).map(([what, value]) => [what, JSON.stringify(value ?? null)] as const);
  const parsed: RegExpExecArray[] = [];
  const foreign: string[] = [];
  for (const e of entries) {
    const m = RUN_NAME.exec(e);
    if (m) parsed.push(m);
    else if (!(e.startsWith(".") && e.endsWith(".partial"))) foreign.push(e);
  }
  parsed.sort(newestFirst);
  // The newest `keep` stay (counting referenced ones); older ones stay only while something points to them.
  const runs = parsed.map((m, i): RunVerdict => {
    const name = m[0];
    const dir = path.join(root, name);
    const ref = refs.find(([, text]) => names(text, dir));
    if (ref) return { name, keep: { reason: "referenced", why: ref[0] } };
    if (proofDirs.has(dir)) return { name, keep: { reason: "referenced", why: "a KV-transfer proof" } };
    if (i < keep) return { name, keep: { reason: "newest", why: `one of the newest ${keep}` } };
    return { name, keep: null };
  });
  return { engine, runs, foreign };
}
