// The inputs each engine was applied with (inputHashMaterial: no secrets, the API key as its sha256),
// kept as files of the state directory named by the sha256 of their canonical JSON:
// `inputs/<sha256>.json`. A record names its file, `{"$inputs": "<sha256>"}`, instead of holding the
// inputs: they were 2 of a converged record's 7.5 KB, parsed by every `status` and `plan` and appended
// with every write of the record, yet read only to name the fields of a change (and the URL an engine
// held by a rollout still answers on). A plan reads the file of an engine whose desired inputs differ
// from the applied ones, and no other. Files are immutable and shared by records of equal inputs; a
// fold of the state removes those no record names (store.ts).
import fs from "node:fs/promises";
import path from "node:path";
import { canonicalJson, sha256Hex } from "../desired/hash.js";
import { fsyncDir, readOwnFile, writeFileAtomic, writeFileExclusive } from "./atomic-file.js";

/** A record's applied inputs as persisted: the file `inputs/<sha256>.json` of the state directory. */
export interface InputsRef {
  $inputs: string;
}

/** A record's applied inputs: in memory as applied, a reference as read from disk, null when not recorded. */
export type AppliedInputs = Record<string, unknown> | InputsRef | null;

const SHA256 = /^[0-9a-f]{64}$/;

export function isInputsRef(value: unknown): value is InputsRef {
  const v = value as Partial<InputsRef> | null;
  return typeof v === "object" && v !== null && typeof v.$inputs === "string" && Object.keys(v).length === 1;
}

export const inputsDir = (stateDir: string): string => path.join(stateDir, "inputs");

/**
 * One state directory's inputs files, as this process wrote and read them (one instance per store or
 * reader: no module state). The inputs objects it is given are never edited (execute.ts makes one per
 * spec and records share it), so each one's digest is computed once.
 */
export class InputsFiles {
  private readonly digests = new WeakMap<object, { text: string; sha256: string }>();
  /** Files known to hold their name's content, by sha256 (written or checked by this process). */
  private readonly ensured = new Map<string, Promise<void>>();
  private readonly reads = new Map<string, Promise<Record<string, unknown> | null>>();

  constructor(private readonly stateDir: string) {}

  private digest(inputs: Record<string, unknown>): { text: string; sha256: string } {
    let d = this.digests.get(inputs);
    if (!d) {
      const text = canonicalJson(inputs);
      this.digests.set(inputs, (d = { text, sha256: sha256Hex(text) }));
    }
    return d;
  }

  /** What the value names, for comparing two records: the sha256 of the inputs, whichever form holds them. */
  key(value: AppliedInputs | undefined): string | null {
    if (value === null || value === undefined) return null;
    return isInputsRef(value) ? value.$inputs : this.digest(value).sha256;
  }

  /** The value as persisted: inputs by reference, their file written (and synced) first. */
  async persisted(value: AppliedInputs | undefined): Promise<AppliedInputs | undefined> {
    if (value === null || value === undefined || isInputsRef(value)) return value;
    const { text, sha256 } = this.digest(value);
    let ensured = this.ensured.get(sha256);
    if (!ensured) {
      ensured = this.ensure(sha256, text);
      this.ensured.set(sha256, ensured);
      // A failed write is tried again by the next record that names the file.
      ensured.catch(() => this.ensured.delete(sha256));
    }
    await ensured;
    return { $inputs: sha256 };
  }

  private async ensure(sha256: string, text: string): Promise<void> {
    const file = path.join(inputsDir(this.stateDir), `${sha256}.json`);
    const holds = () => readOrNull(file) === text;
    // Read first: a controller's start persists every record it restores, and all their files are
    // there already; an exclusive write would write and fsync a temporary file per engine to learn that.
    if (holds()) return;
    // A new inputs/ is as durable as the files in it.
    if (await fs.mkdir(inputsDir(this.stateDir), { recursive: true, mode: 0o700 })) await fsyncDir(this.stateDir);
    if (await writeFileExclusive(file, text)) return;
    // There already (edited, cut short, or written since the read): replaced unless it holds these inputs.
    if (!holds()) await writeFileAtomic(file, text);
  }

  /** The inputs a value names; null when it names none, or its file is missing or not what it named. */
  resolve(value: AppliedInputs | undefined): Promise<Record<string, unknown> | null> {
    if (value === null || value === undefined) return Promise.resolve(null);
    if (!isInputsRef(value)) return Promise.resolve(value);
    const sha256 = value.$inputs;
    let read = this.reads.get(sha256);
    if (!read) {
      read = SHA256.test(sha256) ? this.read(sha256) : Promise.resolve(null);
      this.reads.set(sha256, read);
      // Unknown is not kept: a later write of those inputs brings their file back.
      void read.then((inputs) => inputs === null && this.reads.delete(sha256));
    }
    return read;
  }

  private async read(sha256: string): Promise<Record<string, unknown> | null> {
    const text = readOrNull(path.join(inputsDir(this.stateDir), `${sha256}.json`));
    // Not what the record named: unknown, as a record without inputs is (a plan then assumes the worst).
    if (text === null || sha256Hex(text) !== sha256) return null;
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch {
      return null; // never: what hashes to its name is what a store wrote (canonical JSON)
    }
  }

  /** Remove the files none of `named` (the sha256s the state names) is, after a fold wrote the state naming them. */
  async retain(named: ReadonlySet<string>): Promise<void> {
    const names = await fs.readdir(inputsDir(this.stateDir)).catch(() => [] as string[]);
    await Promise.all(
      names
        .filter((name) => name.endsWith(".json") && !named.has(name.slice(0, -5)))
        .map((name) => {
          this.ensured.delete(name.slice(0, -5));
          this.reads.delete(name.slice(0, -5));
          // Best effort: a file left behind is only disk, removed by the next fold.
          return fs.rm(path.join(inputsDir(this.stateDir), name), { force: true }).catch(() => undefined);
        }),
    );
  }
}

function readOrNull(file: string): string | null {
  try {
    return readOwnFile(file, "utf8");
  } catch {
    return null;
  }
}
