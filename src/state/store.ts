// The state: a lowdb database holding one record per engine, persisted (0600) after every machine
// transition. It is an index of what the controller knows; the world (processes, containers, run
// directories) wins over it on restart. A write appends only what changed to narwhal.journal and
// fdatasyncs it (state-journal.ts), so its cost does not grow with the fleet; changes made together
// (the same tick, or while a write is under way) go out as one write, and a change that changes
// nothing is no write at all. The journal is folded into narwhal.json when it outgrows the base, and on
// open and close unless it holds only when engines were observed (state-journal-file.ts).
import fs from "node:fs/promises";
import { Low } from "lowdb";
import { StateFileError, type ErrorRecord } from "../errors.js";
import type { EngineHandle, Inspection, CacheLayout, CheckResult } from "../phases/types.js";
import { sweepAtomicTemps } from "./atomic-file.js";
import { STATE_VERSION } from "./state-file.js";
import { changesRecords, journalPath, readStateDir, stateFilePath, type JournalOp } from "./state-journal.js";
import { baseSize, JournalFile } from "./state-journal-file.js";
import { noFailpoints, type Failpoint } from "../failpoints.js";
import { RunFiles, UnrestorableEvidence } from "./evidence-refs.js";
import { InputsFiles, type AppliedInputs } from "./applied-inputs.js";
import type { ObservedProof } from "../controller/plan-types.js";
import { append } from "../controller/map-lists.js";

export { STATE_VERSION, stateFilePath };
/**
 * Transitions kept per engine, on every write: an outwaited cause is re-checked every resync
 * period for as long as it lasts, so an uncapped history would grow the state file without end.
 */
export const HISTORY_LIMIT = 50;

export interface Condition {
  type: string;
  status: "True" | "False";
  reason: string;
  message: string;
  /** When status last changed (Kubernetes' lastTransitionTime): a condition that holds keeps its time. */
  lastTransitionTime: string;
}

export interface HistoryEntry {
  at: string;
  from: string;
  to: string;
  event?: string;
  note?: string;
}

export interface EngineRecord {
  engine: string;
  backend: string;
  phase: string;
  desired_hash: string;
  /** Input hash of the plan the live engine was started from. */
  running_hash: string | null;
  group_signature: string | null;
  run_dir: string | null;
  plan_sha256: string | null;
  handle: EngineHandle | null;
  inspection:
    | (Pick<Inspection, "accelerator" | "image_id" | "model_config_sha256" | "physical_gpu_count"> &
        Partial<Pick<Inspection, "model_tree_sha256">>)
    | null;
  checked: Pick<CheckResult, "vllm_api_version" | "image_id" | "nixl_compat_hash"> | null;
  layout: CacheLayout | null;
  conditions: Condition[];
  last_error: ErrorRecord | null;
  attempts: number;
  retry_at: number | null;
  history: HistoryEntry[];
  /** xstate persisted snapshot (secrets never in it: specs are stripped). */
  snapshot: unknown;
  updated_at: string;
  /** The role it was applied with; absent in files written before roles were kept. */
  role?: string;
  /**
   * inputHashMaterial of the spec last applied (no secrets), so a plan can name the fields a change touches:
   * persisted as a reference to its file (applied-inputs.ts), which is how records read from disk hold it.
   */
  applied_inputs?: AppliedInputs;
  /** When a controller last observed this engine (liveness, health, key). */
  observed_at?: string;
  /** Why a rollout halted on this engine (its replacement failed); null or absent: not halted. */
  halted?: string | null;
}

export interface StateFile {
  version: number;
  engines: Record<string, EngineRecord>;
  /** The latest KV-transfer proof of each prefill → decode pair, by pairKey (absent: none yet). */
  proofs?: Record<string, ObservedProof>;
  /** Engines `narwhal suspend` suspended, each with when (absent: none): observed, never changed. */
  suspended?: Record<string, string>;
  /** narwhal.json only: the last journal entry it holds (absent: 0). Never in a StateFile read through the store. */
  journal_seq?: number;
}

/** How records are written: evidence and applied inputs by reference to the files that hold them. */
interface Persisting {
  runFiles: RunFiles;
  inputs: InputsFiles;
}

export class StateStore {
  private readonly db: Low<StateFile>;
  /** Writes are chained so two batches never interleave; `next` is the batch not yet begun, which new changes join. */
  private chain: Promise<void> = Promise.resolve();
  private next: Promise<void> | null = null;
  private readonly dirty = { engines: new Set<string>(), observed: new Set<string>(), proofs: new Set<string>(), suspended: false };

  private constructor(
    readonly stateDir: string,
    private readonly failpoint: Failpoint,
    /** lowdb's adapter: its whole-document write folds the journal into narwhal.json. */
    private readonly journal: JournalFile,
    initial: StateFile,
    /** Evidence and applied inputs: persisted records name their files instead of holding a copy. */
    private readonly persisting: Persisting,
    /** Told how long each write took (watch mode's metrics). */
    private readonly onWrite?: (seconds: number, ok: boolean) => void,
  ) {
    this.db = new Low<StateFile>(journal, initial);
  }

  /**
   * Open (or create) the state; called under the state lock. A base or journal that is not usable
   * (does not parse, a record of the wrong shape, a FIFO, a directory, a symlink to a device) is moved
   * aside, never silently reset and never waited on; the controller then rebuilds from what it observes.
   * Temps of a killed writer are swept first: under the lock no live writer is ours. A journal left by
   * a killed controller is folded into narwhal.json here, which also drops a line its death cut short; one
   * of observations alone that a clean exit kept is appended to.
   * A narwhal.json from before the journal is read as it is (journal_seq 0): nothing to migrate.
   */
  static async open(
    stateDir: string,
    failpoint: Failpoint = noFailpoints,
    onWrite?: (seconds: number, ok: boolean) => void,
  ): Promise<StateStore> {
    await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
    // Depth 3 reaches runs/<engine>/<run>/, where evidence is written through the same temps.
    const sweptTemps = await sweepAtomicTemps(stateDir, 3);
    let aside: { file: string; reason: string } | null = null;
    let read;
    try {
      read = await readStateDir(stateDir);
    } catch (err) {
      // An IO error (EACCES, EIO, ...) is not corruption: moving the file aside would lose a good state.
      // Nor is a file of another version: it belongs to another narwhal, which can still read it.
      if (!(err instanceof StateFileError) || err.kind === "unsupported") throw err;
      aside = { file: await moveAside(err.input === journalPath(stateDir) ? err.input : stateFilePath(stateDir), err), reason: err.message };
      // A journal whose base is gone is only part of a state (evidence beside the base); a base is whole.
      if (err.input === journalPath(stateDir)) read = await readStateDir(stateDir);
      else await moveAside(journalPath(stateDir), err).catch((e: NodeJS.ErrnoException) => e.code === "ENOENT" || Promise.reject(e));
    }
    const initial = read?.state ?? { version: STATE_VERSION, engines: {} };
    const persisting = { runFiles: new RunFiles(), inputs: new InputsFiles(stateDir) };
    const journal = new JournalFile(stateDir, initial, read ?? null, await baseSize(stateDir), {
      persisted: (engines) => persistedEngines(persisting, engines),
      // After the base that names them is on disk: inputs files no record names any more are removed.
      folded: (engines) => persisting.inputs.retain(namedInputs(persisting.inputs, engines)),
    });
    const store = new StateStore(stateDir, failpoint, journal, initial, persisting, onWrite);
    store.sweptTemps = sweptTemps;
    store.movedAside = aside?.file ?? null;
    store.asideReason = aside?.reason ?? null;
    // A base of an older version is rewritten in this one before anything is appended to it: a narwhal
    // of that version then refuses the directory instead of misreading entries it does not know.
    const older = !!read && read.state.version !== STATE_VERSION;
    if (read && (journal.unsettled || read.torn || older)) await store.db.write();
    store.db.data.version = STATE_VERSION;
    return store;
  }

  /** Set when open() found an unusable state file or journal and moved it aside (the file keeps the evidence). */
  movedAside: string | null = null;
  /** Why it was moved aside, for the operator. */
  asideReason: string | null = null;
  /** Temps of killed writers that open() removed. */
  sweptTemps: string[] = [];
  /**
   * Writes made (each one append and fdatasync), changes that changed nothing and were not written, and
   * the writes that changed more than when engines were observed (what a run's retention depends on).
   */
  readonly writes = { made: 0, skipped: 0, changed: 0 };

  get data(): StateFile {
    return this.db.data;
  }

  engine(name: string): EngineRecord | undefined {
    return this.db.data.engines[name];
  }

  /** Update one engine's record and persist; the history is capped. A record that did not change is not written. */
  update(name: string, patch: (prev: EngineRecord | undefined) => EngineRecord | null): Promise<void> {
    const prev = this.db.data.engines[name];
    const next = patch(prev);
    if (next === null) {
      if (prev === undefined) return this.skip();
      delete this.db.data.engines[name];
    } else {
      next.history = next.history.slice(-HISTORY_LIMIT);
      if (prev && this.sameRecord(prev, next)) {
        this.db.data.engines[name] = { ...next, updated_at: prev.updated_at };
        return this.skip();
      }
      next.updated_at = new Date().toISOString();
      this.db.data.engines[name] = next;
    }
    this.dirty.engines.add(name);
    return this.flush();
  }

  /** A record as compared for a skipped write: everything but the time of the write, its inputs by what they hold. */
  private sameRecord(a: EngineRecord, b: EngineRecord): boolean {
    const { inputs } = this.persisting;
    const comparable = (r: EngineRecord) => JSON.stringify({ ...r, updated_at: "", applied_inputs: inputs.key(r.applied_inputs) });
    return comparable(a) === comparable(b);
  }

  /** The inputs a record names (its file read once per process); null: none recorded, or their file is gone or altered. */
  appliedInputs(value: AppliedInputs | undefined): Promise<Record<string, unknown> | null> {
    return this.persisting.inputs.resolve(value);
  }

  /**
   * The record with its snapshot's evidence read back from its run directory, for a machine to restore
   * (`problem`: why it cannot be, naming the file). The store keeps the whole snapshot from then on: it
   * is what is on disk, so the restored machine's first record is not a change.
   */
  async withEvidence(record: EngineRecord): Promise<{ record: EngineRecord; problem: string | null }> {
    try {
      const whole = { ...record, snapshot: await this.persisting.runFiles.join(record.snapshot) };
      if (this.db.data.engines[record.engine] === record) this.db.data.engines[record.engine] = whole;
      return { record: whole, problem: null };
    } catch (err) {
      if (err instanceof UnrestorableEvidence) return { record, problem: err.message };
      throw err;
    }
  }

  /** A record edited in place (markObserved): persisted by the next flush. */
  mark(name: string): void {
    this.dirty.engines.add(name);
  }

  /**
   * A record whose observed_at alone was set in place (markObserved): the next flush persists it as one
   * small op naming every such engine, not as the whole record (about 10 KB a converged engine).
   */
  markObservedAt(name: string): void {
    this.dirty.observed.add(name);
  }

  /** The latest proof of every pair (empty: none). */
  proofs(): Record<string, ObservedProof> {
    return this.db.data.proofs ?? {};
  }

  /** Record a pair's latest proof (null: forget it) and persist. */
  setProof(key: string, proof: ObservedProof | null): Promise<void> {
    const was = this.proofs()[key];
    if (JSON.stringify(was ?? null) === JSON.stringify(proof)) return this.skip();
    // A new object, never an edit in place: an observation holds the map it read, and a proof runs only
    // if the pair's entry is still the one its plan saw (kv-proofs.ts).
    const proofs = { ...this.proofs() };
    if (proof === null) delete proofs[key];
    else proofs[key] = proof;
    this.db.data.proofs = proofs;
    this.dirty.proofs.add(key);
    return this.flush();
  }

  /** Suspended engines and since when (empty: none). */
  suspended(): Record<string, string> {
    return this.db.data.suspended ?? {};
  }

  /** Suspend (since `at`) or resume engines, and persist; an engine already so keeps its time. */
  setSuspended(names: readonly string[], on: boolean, at = new Date().toISOString()): Promise<void> {
    // A new object, as setProof does: an observation holds the map it read.
    const next = { ...this.suspended() };
    for (const n of names) {
      if (!on) delete next[n];
      else next[n] ??= at;
    }
    if (JSON.stringify(next) === JSON.stringify(this.suspended())) return this.skip();
    this.db.data.suspended = next;
    this.dirty.suspended = true;
    return this.flush();
  }

  private skip(): Promise<void> {
    this.writes.skipped++;
    return this.flush();
  }

  /**
   * Persist every change not yet on disk; resolves once they (and any write under way) are. Changes made
   * before the batch begins join it: one write however many engines changed. Nothing changed: no write.
   */
  flush(): Promise<void> {
    if (this.next) return this.next;
    const batch = this.chain
      .catch(() => undefined)
      .then(() => {
        this.next = null;
        return this.writeBatch();
      });
    this.next = batch;
    this.chain = batch;
    return batch;
  }

  private async writeBatch(): Promise<void> {
    const ops = this.takeDirty();
    if (ops.length === 0) return;
    this.failpoint("state:write:before");
    const began = performance.now();
    try {
      if (this.journal.needsFold) await this.db.write();
      await this.journal.append(await Promise.all(ops.map((op) => persistedOp(this.persisting, op))));
    } catch (err) {
      // Not on disk: the next write carries these changes again (as they are by then).
      for (const op of ops) this.remark(op);
      this.onWrite?.((performance.now() - began) / 1000, false);
      throw err;
    }
    this.writes.made++;
    if (changesRecords(ops)) this.writes.changed++;
    this.onWrite?.((performance.now() - began) / 1000, true);
    this.failpoint("state:write:after");
    // Amortized O(1): the journal is folded only once it outgrew the base it would rewrite.
    if (this.journal.outgrown()) await this.db.write();
  }

  private takeDirty(): JournalOp[] {
    const { engines, proofs } = this.db.data;
    // By the time they hold (one observation: one op); a record written whole carries its own.
    const observed = new Map<string, string[]>();
    for (const name of this.dirty.observed) {
      const at = engines[name]?.observed_at;
      if (at === undefined || this.dirty.engines.has(name)) continue;
      append(observed, at, name);
    }
    const ops: JournalOp[] = [
      ...[...this.dirty.engines].map((engine) => ({ engine, record: engines[engine] ?? null })),
      ...[...observed].map(([at, names]) => ({ observed: at, engines: names })),
      ...[...this.dirty.proofs].map((proof) => ({ proof, value: proofs?.[proof] ?? null })),
      ...(this.dirty.suspended ? [{ suspended: this.suspended() }] : []),
    ];
    this.dirty.engines.clear();
    this.dirty.observed.clear();
    this.dirty.proofs.clear();
    this.dirty.suspended = false;
    return ops;
  }

  private remark(op: JournalOp): void {
    if ("engine" in op) this.dirty.engines.add(op.engine);
    else if ("observed" in op) for (const name of op.engines) this.dirty.observed.add(name);
    else if ("proof" in op) this.dirty.proofs.add(op.proof);
    else this.dirty.suspended = true;
  }

  /**
   * Persist what is pending, fold the journal into narwhal.json unless it holds only observations (small ones:
   * JournalFile.unsettled) and close it.
   */
  async close(): Promise<void> {
    try {
      await this.flush();
      await this.chainedFold();
    } finally {
      // A fold that failed (a full disk) leaves the journal for the next open; its descriptor is let go either way.
      await this.journal.close();
    }
  }

  /** Fold after every write under way (never beside an append). */
  private chainedFold(): Promise<void> {
    const fold = this.chain.catch(() => undefined).then(() => (this.journal.unsettled ? this.db.write() : undefined));
    this.chain = fold;
    return fold;
  }
}

/** A record as written: its snapshot's evidence named in its run directory where that holds it, its inputs by their file. */
async function persistedRecord({ runFiles, inputs }: Persisting, record: EngineRecord): Promise<EngineRecord> {
  const snapshot = record.snapshot ? await runFiles.encode(record.snapshot) : record.snapshot;
  const applied_inputs = await inputs.persisted(record.applied_inputs);
  return snapshot === record.snapshot && applied_inputs === record.applied_inputs ? record : { ...record, snapshot, applied_inputs };
}

/** Every record as written, one after another (a first fold may read every run's files), and what is no longer needed forgotten. */
async function persistedEngines(persisting: Persisting, engines: Record<string, EngineRecord>): Promise<Record<string, EngineRecord>> {
  const out: Record<string, EngineRecord> = {};
  for (const [name, record] of Object.entries(engines)) out[name] = await persistedRecord(persisting, record);
  persisting.runFiles.retain(Object.values(engines).map((r) => r.snapshot));
  return out;
}

/** The sha256s of the inputs files the records name. */
function namedInputs(inputs: InputsFiles, engines: Record<string, EngineRecord>): Set<string> {
  const named = new Set<string>();
  for (const record of Object.values(engines)) {
    const key = inputs.key(record.applied_inputs);
    if (key !== null) named.add(key);
  }
  return named;
}

async function persistedOp(persisting: Persisting, op: JournalOp): Promise<JournalOp> {
  return "engine" in op && op.record ? { engine: op.engine, record: await persistedRecord(persisting, op.record) } : op;
}

async function moveAside(file: string, err: StateFileError): Promise<string> {
  const aside = `${file}.${err.kind}-${new Date().toISOString().replace(/[:.]/g, "")}`;
  await fs.rename(file, aside);
  return aside;
}

/** Read-only view for `status`: no lock, no writes; an unusable state file is a StateFileError, not an empty fleet. */
export async function readState(stateDir: string): Promise<StateFile> {
  return (await readStateDir(stateDir))?.state ?? { version: STATE_VERSION, engines: {} };
}
