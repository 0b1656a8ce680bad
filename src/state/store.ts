// The state file: a lowdb database holding one record per engine, written
// atomically (0600) after every machine transition. It is an index of what the
// controller knows; the world (processes, containers, run directories) wins
// over it on restart.
import fs from "node:fs/promises";
import path from "node:path";
import { Low } from "lowdb";
import type { Adapter } from "lowdb";
import { StateFileError, type ErrorRecord } from "../errors.js";
import type { EngineHandle, Inspection, CacheLayout, CheckResult } from "../phases/types.js";
import { sweepAtomicTemps, writeFileAtomic } from "./atomic-file.js";
import { readStateFile, STATE_VERSION } from "./state-file.js";
import { noFailpoints, type Failpoint } from "../failpoints.js";
import type { ObservedProof } from "../controller/plan-types.js";

export { STATE_VERSION };
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
  /** inputHashMaterial of the spec last applied (no secrets), so a plan can name the fields a change touches. */
  applied_inputs?: Record<string, unknown> | null;
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
}

class AtomicJsonFile implements Adapter<StateFile> {
  constructor(private readonly file: string) {}
  read(): Promise<StateFile | null> {
    return readStateFile(this.file);
  }
  async write(data: StateFile): Promise<void> {
    await writeFileAtomic(this.file, JSON.stringify(data, null, 2) + "\n", 0o600);
  }
}

export function stateFilePath(stateDir: string): string {
  return path.join(stateDir, "narwhal.json");
}

export class StateStore {
  private readonly db: Low<StateFile>;
  /** Writes are chained so two transitions never interleave their renames. */
  private chain: Promise<void> = Promise.resolve();

  private constructor(
    readonly stateDir: string,
    private readonly failpoint: Failpoint,
    /** Told how long each write took (watch mode's metrics). */
    private readonly onWrite?: (seconds: number, ok: boolean) => void,
  ) {
    this.db = new Low<StateFile>(new AtomicJsonFile(stateFilePath(stateDir)), { version: STATE_VERSION, engines: {} });
  }

  /**
   * Open (or create) the state file; called under the state lock. A file that is
   * not a usable state file (does not parse, a record of the wrong shape, a FIFO,
   * a directory, a symlink to a device) is moved aside, never silently reset and
   * never waited on; the controller then rebuilds from what it observes.
   * Temps of a killed writer are swept first: under the lock no live writer is ours.
   */
  static async open(
    stateDir: string,
    failpoint: Failpoint = noFailpoints,
    onWrite?: (seconds: number, ok: boolean) => void,
  ): Promise<StateStore> {
    await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
    const store = new StateStore(stateDir, failpoint, onWrite);
    // Depth 3 reaches runs/<engine>/<run>/, where evidence is written through the same temps.
    store.sweptTemps = await sweepAtomicTemps(stateDir, 3);
    try {
      await store.db.read();
    } catch (err) {
      // An IO error (EACCES, EIO, ...) is not corruption: moving the file aside would lose a good state.
      // Nor is a file of another version: it belongs to another narwhal, which can still read it.
      if (!(err instanceof StateFileError) || err.kind === "unsupported") throw err;
      const aside = `${stateFilePath(stateDir)}.${err.kind}-${new Date().toISOString().replace(/[:.]/g, "")}`;
      await fs.rename(stateFilePath(stateDir), aside);
      store.db.data = { version: STATE_VERSION, engines: {} };
      store.movedAside = aside;
      store.asideReason = err.message;
    }
    return store;
  }

  /** Set when open() found an unusable state file and moved it aside (the file keeps the evidence). */
  movedAside: string | null = null;
  /** Why it was moved aside, for the operator. */
  asideReason: string | null = null;
  /** Temps of killed writers that open() removed. */
  sweptTemps: string[] = [];

  get data(): StateFile {
    return this.db.data;
  }

  engine(name: string): EngineRecord | undefined {
    return this.db.data.engines[name];
  }

  /** Update one engine's record and persist; the history is capped. */
  update(name: string, patch: (prev: EngineRecord | undefined) => EngineRecord | null): Promise<void> {
    const next = patch(this.db.data.engines[name]);
    if (next === null) delete this.db.data.engines[name];
    else {
      next.history = next.history.slice(-HISTORY_LIMIT);
      next.updated_at = new Date().toISOString();
      this.db.data.engines[name] = next;
    }
    return this.flush();
  }

  /** The latest proof of every pair (empty: none). */
  proofs(): Record<string, ObservedProof> {
    return this.db.data.proofs ?? {};
  }

  /** Record a pair's latest proof (null: forget it) and persist. */
  setProof(key: string, proof: ObservedProof | null): Promise<void> {
    // A new object, never an edit in place: an observation holds the map it read, and a proof runs only
    // if the pair's entry is still the one its plan saw (kv-proofs.ts).
    const proofs = { ...this.proofs() };
    if (proof === null) delete proofs[key];
    else proofs[key] = proof;
    this.db.data.proofs = proofs;
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
    this.db.data.suspended = next;
    return this.flush();
  }

  flush(): Promise<void> {
    this.chain = this.chain
      .catch(() => undefined)
      .then(async () => {
        this.failpoint("state:write:before");
        const began = performance.now();
        try {
          await this.db.write();
        } catch (err) {
          this.onWrite?.((performance.now() - began) / 1000, false);
          throw err;
        }
        this.onWrite?.((performance.now() - began) / 1000, true);
        this.failpoint("state:write:after");
      });
    return this.chain;
  }
}

/** Read-only view for `status`: no lock, no writes; an unusable state file is a StateFileError, not an empty fleet. */
export async function readState(stateDir: string): Promise<StateFile> {
  return (await readStateFile(stateFilePath(stateDir))) ?? { version: STATE_VERSION, engines: {} };
}
