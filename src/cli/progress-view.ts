// The live view of a reconcile, as data and lines (pure): which step each engine
// is in, since when, and what that step is waiting for. progress-tty.ts draws it.
import type { ProgressStep, StepProgress, StepWait } from "../phases/progress.js";

export interface EngineProgress {
  step: ProgressStep;
  /** When the step began (ms since the epoch). */
  since: number;
  /** What the step waits for now, since when. */
  wait: (StepWait & { since: number }) | null;
}

/** Engines in a step, by name; an engine whose step ended is no longer shown. */
export type ProgressBoard = ReadonlyMap<string, EngineProgress>;

export function applyProgress(board: ProgressBoard, engine: string, p: StepProgress, now: number): ProgressBoard {
  const next = new Map(board);
  if (p.kind === "begin") next.set(engine, { step: p.step, since: now, wait: null });
  else if (p.kind === "end") next.delete(engine);
  else {
    // A wait reported outside a shown step (a sink called late) still says what is awaited.
    const current = next.get(engine) ?? { step: p.step, since: now, wait: null };
    // How far the same wait has come continues it: its time runs from when it began.
    const since = current.wait?.awaiting === p.wait.awaiting ? current.wait.since : now;
    next.set(engine, { ...current, wait: { ...p.wait, since } });
  }
  return next;
}

/** "4 s", "2 min 5 s", "1 h 3 min": elapsed time as the operator reads it. */
export function elapsedWords(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/**
 * One line per engine in a step, in name order: "a  start  14 s  waiting for /health to answer 200, 12 s of 180",
 * and how far the wait has come when its step can tell ("…, 12 s: 12.1 of 40.0 GiB hashed").
 */
export function progressLines(board: ProgressBoard, now: number): string[] {
  const engines = [...board.keys()].sort();
  const width = Math.max(0, ...engines.map((e) => e.length));
  return engines.map((engine) => {
    const p = board.get(engine)!;
    const base = `${engine.padEnd(width)}  ${p.step.padEnd(8)}  ${elapsedWords(now - p.since)}`;
    if (!p.wait) return base;
    const of = p.wait.limitMs === null ? "" : ` of ${Math.round(p.wait.limitMs / 1000)}`;
    const sofar = p.wait.sofar ? `: ${p.wait.sofar}` : "";
    return `${base}  waiting for ${p.wait.awaiting}, ${Math.floor((now - p.wait.since) / 1000)} s${of}${sofar}`;
  });
}

/** The line after `reconcile --once`: how long it took and how many desired engines are captured. */
export function convergedSummary(
  state: { engines: Record<string, { phase: string } | undefined> },
  desired: { specs: ReadonlyArray<{ name: string }> },
  ms: number,
  converged: boolean,
): string {
  const captured = desired.specs.filter((s) => state.engines[s.name]?.phase === "captured").length;
  const counts = `${captured} of ${desired.specs.length} engine${desired.specs.length === 1 ? "" : "s"} captured`;
  return converged
    ? `converged in ${elapsedWords(ms)}: ${counts}`
    : `not converged after ${elapsedWords(ms)}: ${counts}`;
}
