// An engine's machine holds its inspection and probe results in its context, and the phase that made
// each one wrote it, whole, into the run directory first (inspection.json at prepare, probed[.N].json;
// never rewritten). Persisting the snapshot with a second copy of each made them 2.8 KB of a converged
// record's 10 KB, read and parsed by every `status` and `plan` (issue 14: "keep bulky observations in
// the run directory, not the state"). The persisted snapshot names the file instead, with the sha256
// of its JSON: `{"$run_file": "inspection.json", "sha256": ...}`.
//
// A reference is written only after the file was read and found to hold exactly the context's value;
// anything else (no run directory yet, a run reused with an older inspection, an unreadable file) stays
// inline. A restore reads each file back and checks the digest: a file gone or changed makes the
// snapshot unrestorable, and the controller rebuilds the engine from what runs, saying which file.
//
// The check's result stays inline: checked.json binds the launch plan (its plan_sha256), and a run
// whose launch.json and checked.json were both edited must be refused at start by the hash the state
// holds (reconcile-shared e2e), not rebuilt from a snapshot that no longer restores.
import fs from "node:fs/promises";
import path from "node:path";
import { sha256Hex } from "../desired/hash.js";
import { readOwnFile } from "./atomic-file.js";

/** Where one piece of evidence is: a file of the run directory and the sha256 of its JSON (compact). */
export interface RunFileRef {
  $run_file: string;
  sha256: string;
}

type Slot = "inspection" | "probe";
const SLOTS: readonly Slot[] = ["inspection", "probe"];
/** The files each slot's phase writes: the probe writes probed.json, then probed.2.json ... on a new probe. */
const SLOT_FILE: Record<Slot, RegExp> = {
  inspection: /^inspection\.json$/,
  probe: /^probed(?:\.[1-9][0-9]*)?\.json$/,
};

/** An object whose evidence slots a run directory holds: the context (its run), or the engine it retires. */
interface Holder {
  values: Record<string, unknown>;
  dir: string | null;
}

type Context = Record<string, unknown> & {
  run?: { dir?: string } | null;
  retiring?: (Record<string, unknown> & { run?: { dir?: string } | null; restorable?: Record<string, unknown> | null }) | null;
};

export function isRunFileRef(value: unknown): value is RunFileRef {
  const v = value as Partial<RunFileRef> | null;
  return typeof v === "object" && v !== null && typeof v.$run_file === "string" && typeof v.sha256 === "string";
}

/**
 * A copy of `snapshot` with each holder's evidence replaced by what `replace` gives (undefined: as it
 * is); the snapshot itself is never edited (the store's records are the controller's memory).
 */
async function mapEvidence(
  snapshot: unknown,
  replace: (slot: Slot, value: unknown, dir: string | null) => Promise<unknown>,
): Promise<unknown> {
  const snap = snapshot as { context?: Context } | null;
  const ctx = snap?.context;
  if (!ctx || typeof ctx !== "object") return snapshot;
  const swap = async (holder: Holder): Promise<Record<string, unknown>> => {
    const out = { ...holder.values };
    for (const slot of SLOTS) {
      if (out[slot] === null || out[slot] === undefined) continue;
      const next = await replace(slot, out[slot], holder.dir);
      if (next !== undefined) out[slot] = next;
    }
    return out;
  };
  const context: Context = await swap({ values: ctx, dir: ctx.run?.dir ?? null });
  const retiring = ctx.retiring;
  if (retiring?.restorable) {
    const restorable = await swap({ values: retiring.restorable, dir: retiring.run?.dir ?? null });
    context.retiring = { ...retiring, restorable };
  }
  return { ...snap, context };
}

/** The context as a reader without the run directory sees it: evidence left in a file reads as null. */
export function withoutRunFiles<T>(context: T): T {
  const ctx = context as Context;
  const drop = (values: Record<string, unknown>) => {
    const out = { ...values };
    for (const slot of SLOTS) if (isRunFileRef(out[slot])) out[slot] = null;
    return out;
  };
  const light = drop(ctx);
  if (ctx.retiring?.restorable) light.retiring = { ...ctx.retiring, restorable: drop(ctx.retiring.restorable) };
  return light as T;
}

/** A snapshot whose evidence could not be read back: why, naming the file. */
export class UnrestorableEvidence extends Error {}

/**
 * The run directories' evidence as this process read it: a file is never rewritten once written, so
 * what was read of it stays true (one instance per store: no module state).
 */
export class RunFiles {
  /** By run directory: each evidence file read, as compact JSON, and its sha256 once a reference named it. */
  private readonly known = new Map<string, Map<string, { text: string; sha256?: string }>>();
  /**
   * The reference each evidence object was found to be, by the object: a machine keeps the object a
   * restore read (or a write matched) until its step makes a new one, and evidence is never edited in
   * place, so its next write names the file again without serialising it (a no-op persists every
   * engine it restored: 20 ms at 64 engines).
   */
  private readonly refs = new WeakMap<object, { dir: string; ref: RunFileRef }>();

  private remember(value: unknown, dir: string, ref: RunFileRef): RunFileRef {
    if (typeof value === "object" && value !== null) this.refs.set(value, { dir, ref });
    return ref;
  }

  private learn(dir: string, name: string, text: string, sha256?: string): void {
    let files = this.known.get(dir);
    if (!files) this.known.set(dir, (files = new Map()));
    files.set(name, { text, sha256 });
  }

  private match(slot: Slot, text: string, dir: string): RunFileRef | undefined {
    for (const [name, file] of this.known.get(dir) ?? []) {
      if (file.text === text && SLOT_FILE[slot].test(name))
        return { $run_file: name, sha256: (file.sha256 ??= sha256Hex(text)) };
    }
    return undefined;
  }

  /** Forget the files of every run directory none of `snapshots` holds (a long watch replaces many runs). */
  retain(snapshots: Iterable<unknown>): void {
    const dirs = new Set<string>();
    for (const snap of snapshots) {
      const ctx = (snap as { context?: Context } | null)?.context;
      for (const dir of [ctx?.run?.dir, ctx?.retiring?.run?.dir]) if (typeof dir === "string") dirs.add(dir);
    }
    for (const dir of this.known.keys()) if (!dirs.has(dir)) this.known.delete(dir);
  }

  /** Read the slot's files of `dir` not read before. A file that cannot be read now is tried again next time. */
  private async readNew(slot: Slot, dir: string): Promise<void> {
    const names = await fs.readdir(dir).catch(() => [] as string[]);
    for (const name of names) {
      if (!SLOT_FILE[slot].test(name) || this.known.get(dir)?.has(name)) continue;
      const text = await compactJson(path.join(dir, name)).catch(() => null);
      if (text !== null) this.learn(dir, name, text);
    }
  }

  private async refFor(slot: Slot, value: unknown, dir: string): Promise<RunFileRef | undefined> {
    const seen = typeof value === "object" && value !== null ? this.refs.get(value) : undefined;
    if (seen?.dir === dir && SLOT_FILE[slot].test(seen.ref.$run_file)) return seen.ref;
    const text = JSON.stringify(value);
    const known = this.match(slot, text, dir);
    if (known) return this.remember(value, dir, known);
    await this.readNew(slot, dir);
    const found = this.match(slot, text, dir);
    return found && this.remember(value, dir, found);
  }

  /** The snapshot as persisted: each piece of evidence its run directory holds as it is, by reference. */
  encode(snapshot: unknown): Promise<unknown> {
    return mapEvidence(snapshot, async (slot, value, dir) =>
      dir === null || isRunFileRef(value) ? undefined : this.refFor(slot, value, dir),
    );
  }

  /** The snapshot a machine restores: every reference read back and checked. Throws UnrestorableEvidence. */
  join(snapshot: unknown): Promise<unknown> {
    return mapEvidence(snapshot, async (slot, value, dir) => {
      if (!isRunFileRef(value)) return undefined;
      if (dir === null || !SLOT_FILE[slot].test(value.$run_file))
        throw new UnrestorableEvidence(`its ${slot} names ${JSON.stringify(value.$run_file)}, not a file of its run`);
      const file = path.join(dir, value.$run_file);
      // Read for this restore, not from what this process read before: the check is of the file now.
      let text: string;
      try {
        text = await compactJson(file);
      } catch (err) {
        const why = (err as NodeJS.ErrnoException).code ?? "not JSON";
        throw new UnrestorableEvidence(`its ${slot} evidence ${file} cannot be read (${why})`);
      }
      if (sha256Hex(text) !== value.sha256)
        throw new UnrestorableEvidence(`its ${slot} evidence ${file} is not the one the state recorded (sha256 differs)`);
      this.learn(dir, value.$run_file, text, value.sha256); // the next write of this snapshot names the file again, reading nothing
      const restored = JSON.parse(text) as unknown;
      this.remember(restored, dir, { $run_file: value.$run_file, sha256: value.sha256 });
      return restored;
    });
  }
}

async function compactJson(file: string): Promise<string> {
  return JSON.stringify(JSON.parse(readOwnFile(file, "utf8")));
}
