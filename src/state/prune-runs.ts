// Removing the run directories retention.ts decides to let go: state/runs/<engine>/<run>.
// A run is first renamed to its hidden `.partial` name, then removed, so a prune cut short
// leaves what removePartialRuns (run-dir.ts) already cleans up, never a half-empty run that
// looks whole. A run holding a failed start's start-failure.json goes only together with the
// container kept for it (container-failed.ts): without a way to remove that container
// (`removeKept` absent, as in watch mode) the run stays, so no kept container outlives its evidence.
import fs from "node:fs/promises";
import path from "node:path";
import { START_FAILURE_FILE } from "../backends/container-failed.js";
import { describeFailure } from "../errors.js";
import { readJsonIfExists } from "./atomic-file.js";
import { decideRetention, proofRunDirs } from "./retention.js";
import { runsRoot } from "./run-dir.js";
import type { StateFile } from "./store.js";

/** What start-failure.json says about the container kept for a failed start. */
export interface KeptContainer {
  engine: string;
  id: string;
  name: string;
  endpoint: string;
}

export interface PruneOptions {
  keep: number;
  dryRun: boolean;
  /** Remove a run's kept container (absent: runs with one stay); a rejection keeps the run. */
  removeKept?: (kept: KeptContainer) => Promise<void>;
  /** Remove the run's copy on the engine's node (ssh: <work_dir>/<engine>/<run>) first; a rejection keeps the run. */
  removeOnNode?: (engine: string, dir: string) => Promise<void>;
}

export interface PrunedEngine {
  engine: string;
  removed: Array<{ run: string; kept_container: string | null }>;
  kept: Array<{ run: string; why: string }>;
  /** Runs retention let go that stay anyway, with why (a kept container that cannot be removed now). */
  failed: Array<{ run: string; why: string }>;
  /** Entries of the engine's runs root that narwhal did not make (left alone). */
  foreign: string[];
}

async function keptContainerOf(dir: string): Promise<KeptContainer | null> {
  const e = await readJsonIfExists<{ engine?: unknown; Id?: unknown; Name?: unknown; endpoint?: unknown }>(
    path.join(dir, START_FAILURE_FILE),
  ).catch(() => null);
  if (!e || typeof e.Id !== "string") return null;
  return { engine: String(e.engine), id: e.Id, name: String(e.Name), endpoint: String(e.endpoint) };
}

async function engineDirs(stateDir: string): Promise<string[]> {
  try {
    const entries = await fs.readdir(path.join(stateDir, "runs"), { withFileTypes: true });
    return entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}

/** Prune every engine's runs under `stateDir` by `state`; the caller holds the state lock (or is its controller). */
export async function pruneRuns(stateDir: string, state: StateFile, opts: PruneOptions): Promise<PrunedEngine[]> {
  const report: PrunedEngine[] = [];
  const proofDirs = proofRunDirs(state.proofs);
  for (const engine of await engineDirs(stateDir)) {
    const root = runsRoot(stateDir, engine);
    const decision = decideRetention(engine, root, await fs.readdir(root), opts.keep, state, proofDirs);
    const out: PrunedEngine = { engine, removed: [], kept: [], failed: [], foreign: decision.foreign };
    for (const v of decision.runs) {
      if (v.keep) {
        out.kept.push({ run: v.name, why: v.keep.why });
        continue;
      }
      const dir = path.join(root, v.name);
      const kept = await keptContainerOf(dir);
      if (kept && !opts.removeKept) {
        out.failed.push({ run: v.name, why: `its failed start kept container ${kept.name}: narwhal prune removes both` });
        continue;
      }
      if (!opts.dryRun) {
        try {
          if (kept) await opts.removeKept?.(kept);
        } catch (err) {
          out.failed.push({ run: v.name, why: `cannot remove its kept container ${kept?.name}: ${describeFailure(err)}` });
          continue;
        }
        try {
          await opts.removeOnNode?.(engine, dir);
        } catch (err) {
          out.failed.push({ run: v.name, why: `cannot remove its copy on the engine's node: ${describeFailure(err)}` });
          continue;
        }
        const aside = path.join(root, `.${v.name}.partial`);
        await fs.rename(dir, aside);
        await fs.rm(aside, { recursive: true, force: true });
      }
      out.removed.push({ run: v.name, kept_container: kept?.name ?? null });
    }
    report.push(out);
  }
  return report;
}
