// `narwhal status` as data (pure): the state file's records joined with what
// was read beside them — desired/ now, the state lock's holder, and, when no
// controller runs, a one-time check of each recorded process or container.
// Rendering is status-render.ts; the reading is status-read.ts.
import type { EngineRecord, StateFile } from "../state/store.js";
import type { EngineHandle } from "../phases/types.js";
import type { EngineContext } from "../../machines/engine-context.js";
import type { Liveness } from "../controller/plan-types.js";
import type { LockHolder } from "../state/lock.js";
import { groupReport } from "../controller/groups.js";
import { recordContext } from "../controller/record.js";
import { compareNames } from "../controller/in-service.js";

/** desired/ as it is now, loaded the way the controller loads it. */
export interface DesiredNow {
  dir: string;
  valid: boolean;
  /** Per desired engine: its input hash now (null when desired/ could not be loaded). */
  engines: Record<string, { input_hash: string; backend: string; role: string }> | null;
  /** Number of validation issues (0 when valid or unreadable). */
  issues: number;
  /** Why DESIRED shows "?", said once above the table (null when valid). */
  problem: string | null;
}

/** Who holds the state directory. */
export interface ControllerView {
  /** null: it cannot be told (the lock cannot be read). */
  running: boolean | null;
  holder: LockHolder | null;
  /** The lock names a holder that is gone (what a starting controller takes over). */
  stale: boolean;
  /** The holder runs on another host: presumed alive, its process cannot be checked from here. */
  remote: boolean;
  problem: string | null;
  /** mtime of the state file (null: none yet). */
  state_written_at: string | null;
}

/** One engine's recorded process or container as checked just now. */
export interface Live {
  liveness: Liveness;
  /** Why it is gone or cannot be told (null when alive). */
  problem: string | null;
}

export interface StatusEngine extends Omit<
  EngineRecord,
  "snapshot" | "desired_hash" | "running_hash" | "observed_at" | "updated_at"
> {
  snapshot: undefined;
  /** Kept for compatibility: the APPLIED hash (what the controller last applied), not desired/ now. */
  desired_hash: string | null;
  /** APPLIED: the input hash the controller last applied (null: not created yet). */
  applied_hash: string | null;
  /** DESIRED: the input hash desired/ gives now (null: not in desired/, or desired/ could not be loaded). */
  desired_hash_now: string | null;
  /** RUNNING: the input hash of the engine that runs (the retiring one's while its replacement is prepared). */
  running_hash: string | null;
  /** When a controller last observed it (null: never). */
  observed_at: string | null;
  updated_at: string | null;
  pid: number | null;
  container_id: string | null;
  /** True when pid/container_id name the engine kept serving old inputs while its replacement is prepared. */
  retiring: boolean;
  layout_matches_group: boolean | null;
  /** The no-controller check of pid/container_id (null: not checked — a controller runs, or nothing to check). */
  live: Live | null;
  /** The launcher that made the run's plan (read for `status ENGINE` only; null: not read or no plan). */
  launcher: StatusLauncher | null;
  /** When `narwhal suspend` suspended it (null: not suspended): observed, never changed. */
  suspended_since: string | null;
}

/** A plan's launcher beside this narwhal's: a differing one means the next plan replaces the engine. */
export interface StatusLauncher {
  digest: string;
  version: string;
  /** The digest equals the running narwhal's. */
  current: boolean;
}

export interface StatusView {
  engines: StatusEngine[];
  groups: ReturnType<typeof groupReport>;
  controller: ControllerView | null;
  desired: DesiredNow | null;
  /** The no-controller check: when, and how many engines it checked (null: not run). */
  checked: { at: string; engines: number } | null;
  /** The latest KV-transfer proof of each prefill → decode pair; `current`: both engines still run the instances proven. */
  pairs: StatusPair[];
}

export interface StatusPair {
  prefill: string;
  decode: string;
  passed: boolean;
  cause: string | null;
  message: string;
  at: string;
  source: "proof" | "watch";
  current: boolean;
}

/** The pairs as recorded, in name order, each judged against the records' handles now. */
function pairsOf(state: StateFile, engine: string | undefined): StatusPair[] {
  const token = (name: string) => state.engines[name]?.handle?.launch_token;
  return Object.values(state.proofs ?? {})
    .filter((p) => !engine || p.prefill.engine === engine || p.decode.engine === engine)
    .map((p) => ({
      prefill: p.prefill.engine,
      decode: p.decode.engine,
      passed: p.passed,
      cause: p.cause,
      message: p.message,
      at: p.at,
      source: p.source,
      current: token(p.prefill.engine) === p.prefill.launch_token && token(p.decode.engine) === p.decode.launch_token,
    }))
    .sort((a, b) => compareNames(a.prefill, b.prefill) || compareNames(a.decode, b.decode));
}

export interface StatusInputs {
  engine?: string;
  desired?: DesiredNow | null;
  controller?: ControllerView | null;
  live?: { at: string; engines: Record<string, Live> } | null;
  launchers?: Record<string, StatusLauncher>;
}

export const NOT_CREATED = "(not created)";

type Retiring = NonNullable<EngineContext["retiring"]>;

function retiringOf(r: EngineRecord): Retiring | null {
  return recordContext(r).retiring ?? null;
}

/** The process or container that serves for this record: its live engine, else the retiring one (checked and shown). */
export function servingHandle(r: EngineRecord): EngineHandle | null {
  return r.handle ?? retiringOf(r)?.handle ?? null;
}

function notCreated(engine: string, spec: { input_hash: string; backend: string; role: string }): StatusEngine {
  return {
    engine,
    backend: spec.backend,
    role: spec.role,
    phase: NOT_CREATED,
    desired_hash: null,
    applied_hash: null,
    desired_hash_now: spec.input_hash,
    running_hash: null,
    group_signature: null,
    run_dir: null,
    plan_sha256: null,
    handle: null,
    inspection: null,
    checked: null,
    layout: null,
    conditions: [],
    last_error: null,
    attempts: 0,
    retry_at: null,
    history: [],
    snapshot: undefined,
    observed_at: null,
    updated_at: null,
    pid: null,
    container_id: null,
    retiring: false,
    layout_matches_group: null,
    live: null,
    launcher: null,
    suspended_since: null,
  };
}

export function statusView(state: StateFile, inputs: StatusInputs = {}): StatusView {
  const { engine, desired = null, controller = null, live = null, launchers = {} } = inputs;
  const records = Object.values(state.engines).sort((a, b) => compareNames(a.engine, b.engine));
  const groups = groupReport(records);
  const differing = new Set(groups.flatMap((g) => g.differing));
  const wanted = desired?.engines ?? {};
  const rows: StatusEngine[] = records.map((r) => {
    const retiring = retiringOf(r);
    const handle = servingHandle(r);
    // The machine snapshot is not status's to show: overwritten, in one copy of the record. Object.assign onto
    // a fresh object, not a spread: a spread record with these fields after it took 60-90 µs a record in V8
    // (80 ms of a 1000-engine status), Object.assign 20 µs, the same row, keys in the same order.
    return Object.assign({}, r, {
      snapshot: undefined,
      desired_hash: r.desired_hash,
      applied_hash: r.desired_hash,
      desired_hash_now: wanted[r.engine]?.input_hash ?? null,
      running_hash: r.running_hash ?? (!r.handle && retiring ? (retiring.hash ?? null) : null),
      observed_at: r.observed_at ?? null,
      pid: handle?.kind === "native" ? handle.pid : null,
      container_id: handle?.kind === "container" ? handle.container_id : null,
      retiring: !r.handle && !!retiring?.handle,
      layout_matches_group: r.layout ? !differing.has(r.engine) : null,
      live: live?.engines[r.engine] ?? null,
      launcher: launchers[r.engine] ?? null,
      suspended_since: state.suspended?.[r.engine] ?? null,
    });
  });
  for (const [name, spec] of Object.entries(wanted))
    if (!state.engines[name])
      rows.push({ ...notCreated(name, spec), suspended_since: state.suspended?.[name] ?? null });
  rows.sort((a, b) => compareNames(a.engine, b.engine));
  return {
    engines: rows.filter((r) => !engine || r.engine === engine),
    groups,
    controller,
    desired,
    checked: live ? { at: live.at, engines: Object.keys(live.engines).length } : null,
    pairs: pairsOf(state, engine),
  };
}

// Callers that print the table after `reconcile --once` import it from here.
export { renderStatusText } from "./status-render.js";
