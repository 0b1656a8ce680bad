// The writer's side of the state journal (state-journal.ts says what the files hold): appends, each
// made durable by fdatasync before it is acknowledged, and compaction, lowdb's whole-document write.
import fs from "node:fs/promises";
import type { Adapter } from "lowdb";
import type { EngineRecord, StateFile } from "./store.js";
import { STATE_VERSION } from "./state-file.js";
import { sealJson } from "./state-seal.js";
import { fsyncDir, writeFileAtomic } from "./atomic-file.js";
import { changesRecords, journalPath, stateFilePath, type JournalOp, type StateRead } from "./state-journal.js";

/** The journal is folded into the base once it is larger than this and than the base itself. */
const COMPACT_MIN_BYTES = 1 << 20;
/**
 * A journal of observations alone is kept across clean exits until it is this fraction of the base: a no-op
 * `reconcile --once` observes every engine and changes nothing else, and folding its line rewrote the whole
 * base at every run (1.7 MB at 192 engines: a no-op 0.584 -> 0.568 s of CPU without it, side by side). An
 * eighth bounds what a reader replays.
 */
const OBSERVED_SHARE = 1 / 8;

export class JournalFile implements Adapter<StateFile> {
  private handle: fs.FileHandle | null = null;
  /** A failed append could not be cut back: the file may end in a partial line, so fold before appending again. */
  private broken = false;

  /** The seq of the last entry written (the base's when the journal is empty). */
  private seq: number;
  /** Bytes of whole lines in the journal. */
  private bytes: number;
  /** Whether those lines change more than when engines were observed. */
  private records: boolean;

  constructor(
    private readonly stateDir: string,
    private readonly initial: StateFile,
    /** What reading the state directory found of the journal (null: nothing was read, a new state). */
    journal: Pick<StateRead, "seq" | "journalBytes" | "records"> | null,
    private baseBytes: number,
    private readonly hooks: {
      /** The records as they are written (their evidence and inputs by reference to their files). */
      persisted: (engines: Record<string, EngineRecord>) => Promise<Record<string, EngineRecord>>;
      /** Told the records a fold wrote, once they are the base on disk. */
      folded: (engines: Record<string, EngineRecord>) => Promise<void>;
    },
  ) {
    this.seq = journal?.seq ?? 0;
    this.bytes = journal?.journalBytes ?? 0;
    this.records = journal?.records ?? false;
  }

  read(): Promise<StateFile> {
    return Promise.resolve(this.initial);
  }

  /** The whole document: narwhal.json written atomically (holding every entry so far), then the journal removed. */
  async write(data: StateFile): Promise<void> {
    // Compact, not indented: a converged engine's record is about 10 KB of it, and indentation made a
    // 1000-engine base 19.8 MB against 13.3 MB, 0.3 s against 0.17 s for every reader only to read it.
    // Sealed (state-seal.ts): a reader takes what this wrote without checking every record again.
    const engines = await this.hooks.persisted(data.engines);
    const text = sealJson(JSON.stringify({ ...data, version: STATE_VERSION, engines, journal_seq: this.seq }), STATE_VERSION);
    await writeFileAtomic(stateFilePath(this.stateDir), text, 0o600);
    this.baseBytes = Buffer.byteLength(text);
    await this.handle?.close();
    this.handle = null;
    // A crash before this leaves entries the new base holds: replay skips them by seq.
    await fs.rm(journalPath(this.stateDir), { force: true });
    await fsyncDir(this.stateDir);
    this.bytes = 0;
    this.records = false;
    this.broken = false;
    await this.hooks.folded(engines);
  }

  /**
   * Whether to fold at open and close: narwhal.json holds every record, proof and suspension after a clean exit;
   * only when engines were last observed may wait in the journal, while it is a small share of the base.
   */
  get unsettled(): boolean {
    return this.broken || this.records || this.bytes > this.baseBytes * OBSERVED_SHARE;
  }

  /** A failed append may have left a partial line: fold before the next append. */
  get needsFold(): boolean {
    return this.broken;
  }

  /** Amortized O(1) per append: folded only once the journal outgrew the base a fold rewrites. */
  outgrown(): boolean {
    return this.broken || this.bytes > Math.max(COMPACT_MIN_BYTES, this.baseBytes);
  }

  /** Append one batch as the next entry; resolves once it is on disk. A failed append leaves the journal as it was. */
  async append(ops: JournalOp[]): Promise<void> {
    // Sealed as the base is (state-seal.ts): a reader replays it without checking each record again.
    const line = sealJson(JSON.stringify({ seq: this.seq + 1, ops }), STATE_VERSION);
    if (!this.handle) {
      this.handle = await fs.open(journalPath(this.stateDir), "a", 0o600);
      try {
        await this.handle.chmod(0o600); // umask may have narrowed or widened the create mode
        await fsyncDir(this.stateDir); // the journal's name is as durable as its lines
      } catch (err) {
        await this.close();
        throw err;
      }
    }
    try {
      await this.handle.appendFile(line);
      await this.handle.datasync();
    } catch (err) {
      // ENOSPC, EIO: cut the partial line off, or fold before the next append if even that fails.
      await this.handle.truncate(this.bytes).catch(() => {
        this.broken = true;
      });
      throw err;
    }
    this.seq++;
    this.bytes += Buffer.byteLength(line);
    this.records ||= changesRecords(ops);
  }

  async close(): Promise<void> {
    const handle = this.handle;
    this.handle = null;
    await handle?.close();
  }
}

/** Size of the base at open, so the first fold waits as long as later ones. */
export async function baseSize(stateDir: string): Promise<number> {
  return (await fs.stat(stateFilePath(stateDir)).catch(() => null))?.size ?? 0;
}
