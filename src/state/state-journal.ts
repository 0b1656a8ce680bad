// The state journal: narwhal.journal beside narwhal.json. Rewriting the whole state file per
// transition cost O(fleet) (146 ms at 1000 engines, bench/state-store.mjs); appending the records a
// write changed costs O(record). narwhal.json is the base (a state file as before, plus `journal_seq`,
// the last entry it includes); each journal line is one persisted batch, `{"seq":n,"ops":[...]}\n`,
// written by one write() and made durable by fdatasync. The state is the base with every entry after
// its seq applied in order. A line without its newline is a write a crash cut short: never
// acknowledged, so ignored. Compaction writes a new base atomically, then removes the journal: a crash
// between the two leaves entries the base already holds, which replay skips by seq.
import fs from "node:fs/promises";
import path from "node:path";
import * as z from "zod";
import { StateFileError } from "../errors.js";
import type { ObservedProof } from "../controller/plan-types.js";
import type { EngineRecord, StateFile } from "./store.js";
import { EngineRecordSchema, ProofSchema, readStateFile, STATE_VERSION } from "./state-file.js";
import { readRegularFile } from "./atomic-file.js";
import { hasIntactSeal } from "./state-seal.js";

export type JournalOp =
  | { engine: string; record: EngineRecord | null }
  /** Engines a full observation saw, whose records changed in nothing but observed_at (state version 4). */
  | { observed: string; engines: string[] }
  | { proof: string; value: ObservedProof | null }
  | { suspended: Record<string, string> };

const JournalEntrySchema = z
  .object({
    seq: z.number().int().positive().describe("this entry's sequence number: one more than the entry before"),
    ops: z
      .array(
        z.union([
          z.object({ engine: z.string().min(1), record: EngineRecordSchema.nullable() }).describe("an engine's record (null: removed)"),
          z
            .object({
              observed: z.string().describe("ISO time of the observation: each engine's observed_at"),
              engines: z.array(z.string().min(1)).describe("engines whose records changed in nothing else"),
            })
            .describe("a full observation of engines that changed in nothing but when they were observed"),
          z.object({ proof: z.string().min(1), value: ProofSchema.nullable() }).describe("a pair's latest proof (null: forgotten)"),
          z.object({ suspended: z.record(z.string(), z.string()) }).describe("the suspended engines, whole"),
        ]),
      )
      .describe("the changes of one persisted batch, in the order they were made"),
  })
  .describe("one line of narwhal.journal");

export function stateFilePath(stateDir: string): string {
  return path.join(stateDir, "narwhal.json");
}

export function journalPath(stateDir: string): string {
  return path.join(stateDir, "narwhal.journal");
}

/**
 * Apply one entry's changes to a state read from disk, in place: its records are this read's own (parsed from
 * the base or a line), so an observation sets observed_at on them; new proofs/suspended maps are made.
 */
function applyOps(state: StateFile, ops: readonly JournalOp[]): void {
  for (const op of ops) {
    if ("engine" in op) {
      if (op.record === null) delete state.engines[op.engine];
      else state.engines[op.engine] = op.record;
    } else if ("observed" in op) {
      // In place: a journal of observations is kept across clean exits (up to an eighth of the base), and a
      // copy of every record per line made a replay O(lines x engines) in record copies.
      for (const name of op.engines) {
        const record = state.engines[name];
        if (record) record.observed_at = op.observed;
      }
    } else if ("proof" in op) {
      const proofs = { ...(state.proofs ?? {}) };
      if (op.value === null) delete proofs[op.proof];
      else proofs[op.proof] = op.value;
      state.proofs = proofs;
    } else state.suspended = { ...op.suspended };
  }
}

/** What was read of a state directory: the state, the seq of its last entry, and the journal's whole lines. */
export interface StateRead {
  state: StateFile;
  seq: number;
  /** Bytes of the journal's whole lines (where the next append goes); 0: no journal. */
  journalBytes: number;
  /** The journal ended in a line a crash cut short. */
  torn: boolean;
  /** An entry after the base changes more than when engines were observed (a record, a proof, the suspended set). */
  records: boolean;
}

/** Whether `ops` change more than when engines were observed. */
export const changesRecords = (ops: readonly JournalOp[]): boolean => ops.some((op) => !("observed" in op));

function journalError(file: string, line: number, what: string): StateFileError {
  return new StateFileError("corrupt", `state journal ${file} line ${line} ${what}`, {
    input: file,
    fix: "Run `narwhal reconcile`: it moves the journal aside and rebuilds the state from narwhal.json and the engines that run, or move the journal away yourself.",
  });
}

/** Replay the journal at `file` onto `state` (entries after `seq`). Throws StateFileError when it is not a journal. */
async function replay(file: string, state: StateFile, seq: number): Promise<Omit<StateRead, "state">> {
  const read = await readRegularFile(file);
  if (read.kind === "missing") return { seq, journalBytes: 0, torn: false, records: false };
  if (read.kind === "not-regular") throw journalError(file, 0, `is ${read.what}, not a regular file`);
  const lines = read.text.split("\n");
  const tail = lines.pop() ?? ""; // after the last newline: empty, or a write cut short
  let last = seq;
  let records = false;
  for (const [i, line] of lines.entries()) {
    let entry: { seq: number; ops: JournalOp[] };
    try {
      // As written (unknown record fields are kept); checked entry by entry unless the store's seal holds.
      entry = JSON.parse(line) as typeof entry;
      if (!hasIntactSeal(Buffer.from(`${line}\n`), STATE_VERSION)) {
        const checked = JournalEntrySchema.safeParse(entry);
        if (!checked.success) throw journalError(file, i + 1, `is not a journal entry: ${checked.error.issues[0]?.message}`);
      }
    } catch (err) {
      if (err instanceof StateFileError) throw err;
      throw journalError(file, i + 1, `does not parse: ${(err as Error).message}`);
    }
    if (entry.seq <= seq) continue; // the base holds it already (a compaction cut short)
    if (entry.seq !== last + 1) throw journalError(file, i + 1, `has seq ${entry.seq} after ${last}: entries are missing`);
    applyOps(state, entry.ops);
    records ||= changesRecords(entry.ops);
    last = entry.seq;
  }
  return { seq: last, journalBytes: Buffer.byteLength(read.text) - Buffer.byteLength(tail), torn: tail.length > 0, records };
}

async function identity(file: string): Promise<string> {
  const st = await fs.stat(file).catch((err: NodeJS.ErrnoException) => (err.code === "ENOENT" ? null : Promise.reject(err)));
  return st ? `${st.ino}:${st.mtimeMs}:${st.size}` : "none";
}

/**
 * The state of a directory as one consistent view: the base and the journal entries after it. A
 * compaction that renames a new base in while this reads is seen (the base is not the one read) and the
 * read is done again, so a reader never takes an old base with a journal already emptied. Throws
 * StateFileError for a base or journal that is not one; the error's `input` says which.
 */
export async function readStateDir(stateDir: string): Promise<StateRead | null> {
  const base = stateFilePath(stateDir);
  for (let attempt = 0; ; attempt++) {
    const before = await identity(base);
    const file = await readStateFile(base);
    const state: StateFile = file ?? { version: STATE_VERSION, engines: {} };
    const seq = state.journal_seq ?? 0;
    delete state.journal_seq;
    const journal = await replay(journalPath(stateDir), state, seq);
    if ((await identity(base)) === before || attempt >= 5) {
      return file === null && journal.journalBytes === 0 && !journal.torn ? null : { state, ...journal };
    }
  }
}

/** When the state was last written: the newer of the base and the journal (null: never). */
export async function stateWrittenAt(stateDir: string): Promise<string | null> {
  const times = await Promise.all(
    [stateFilePath(stateDir), journalPath(stateDir)].map((f) =>
      fs.stat(f).then(
        // the Date fs builds (its milliseconds), not mtimeMs: new Date(mtimeMs) truncates the fraction, so the
        // two could name different milliseconds for one write
        (st) => st.mtime.getTime(),
        () => null,
      ),
    ),
  );
  const ms = Math.max(...times.filter((t): t is number => t !== null));
  return Number.isFinite(ms) ? new Date(ms).toISOString() : null;
}
