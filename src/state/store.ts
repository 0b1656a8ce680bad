// The state file: a lowdb database holding one record per engine, written
// atomically (0600) after every machine transition. It is an index of what the
// controller knows; the world (processes, containers, run directories) wins
// over it on restart.
import fs from "node:fs/promises";
import path from "node:path";
import { Low } from "lowdb";
import type { Adapter } from "lowdb";
import type { ErrorRecord } from "../errors.js";
import type { EngineHandle, Inspection, CacheLayout, CheckResult } from "../phases/types.js";
import { writeFileAtomic } from "./atomic-file.js";
import { noFailpoints, type Failpoint } from "../failpoints.js";

export const STATE_VERSION = 1;
const HISTORY_LIMIT = 50;

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
  inspection: Pick<Inspection, "accelerator" | "image_id" | "model_config_sha256" | "physical_gpu_count"> | null;
  checked: Pick<CheckResult, "vllm_api_version" | "image_id"> | null;
  layout: CacheLayout | null;
  conditions: Condition[];
  last_error: ErrorRecord | null;
  attempts: number;
  retry_at: number | null;
  history: HistoryEntry[];
  /** xstate persisted snapshot (secrets never in it: specs are stripped). */
  snapshot: unknown;
  updated_at: string;
}

export interface StateFile {
  version: number;
  engines: Record<string, EngineRecord>;
}

class AtomicJsonFile implements Adapter<StateFile> {
  constructor(private readonly file: string) {}
  async read(): Promise<StateFile | null> {
    let text: string;
    try {
      text = await fs.readFile(this.file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw err;
    }
    const parsed = JSON.parse(text) as unknown;
    // `null`, `[]` or `{}` parse, but are not a state file: treat them as corrupt, not as "empty".
    const shape = parsed as Partial<StateFile> | null;
    if (!shape || typeof shape !== "object" || Array.isArray(shape) || typeof shape.version !== "number" || !shape.engines || typeof shape.engines !== "object") {
      throw new SyntaxError(`${this.file} is not a narwhal state file`);
    }
    return parsed as StateFile;
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
  ) {
    this.db = new Low<StateFile>(new AtomicJsonFile(stateFilePath(stateDir)), { version: STATE_VERSION, engines: {} });
  }

  /** Open (or create) the state file. A file that does not parse is moved aside, never silently reset. */
  static async open(stateDir: string, failpoint: Failpoint = noFailpoints): Promise<StateStore> {
    await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
    const store = new StateStore(stateDir, failpoint);
    try {
      await store.db.read();
    } catch (err) {
      // An IO error (EACCES, EIO, ...) is not corruption: moving the file aside would lose a good state.
      if ((err as NodeJS.ErrnoException).code !== undefined) throw err;
      const aside = `${stateFilePath(stateDir)}.corrupt-${new Date().toISOString().replace(/[:.]/g, "")}`;
      await fs.rename(stateFilePath(stateDir), aside);
      store.db.data = { version: STATE_VERSION, engines: {} };
      store.movedAside = aside;
    }
    if (store.db.data.version !== STATE_VERSION) {
      throw new Error(`state file version ${store.db.data.version} is not supported (expected ${STATE_VERSION})`);
    }
    return store;
  }

  /** Set when open() found an unreadable state file and moved it aside. */
  movedAside: string | null = null;

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

  flush(): Promise<void> {
    this.chain = this.chain
      .catch(() => undefined)
      .then(async () => {
        this.failpoint("state:write:before");
        await this.db.write();
        this.failpoint("state:write:after");
      });
    return this.chain;
  }
}

/** Read-only view for `status`: no lock, no writes. */
export async function readState(stateDir: string): Promise<StateFile> {
  try {
    return JSON.parse(await fs.readFile(stateFilePath(stateDir), "utf8")) as StateFile;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { version: STATE_VERSION, engines: {} };
    throw err;
  }
}
