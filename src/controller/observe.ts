// Observe: gather one `Observed` snapshot for the planner — per engine what
// the controller knows of it (its actor, or its state record when no controller
// runs) and what runs (processes by recorded identity, containers by label and
// launch token), with liveness, and for a full observation the health and API
// key of every captured engine. It decides nothing and changes nothing.
import type { EngineContext } from "../../machines/engine.js";
import type { EngineRecord } from "../state/store.js";
import type { DesiredState } from "../desired/types.js";
import type { EngineHandle } from "../phases/types.js";
import { recordContext } from "./record.js";
import { nodeFaultOf, type NodeFault } from "../errors.js";
import { NodeFaults } from "./node-faults.js";
import { isInputsRef, type AppliedInputs } from "../state/applied-inputs.js";

export { recordContext };
import { claimedTokens, planReads, type Owned, type PlanOf, type World } from "./world.js";
import type { OwnedEngine } from "../backends/types.js";
import type { Liveness, Observed, ObservedEngine, ObservedProof, OwnedObserved, ServingFleet } from "./plan-types.js";

/** One engine as the controller knows it: from its actor's snapshot, or from its state record. */
export interface KnownEngine {
  engine: string;
  phase: string;
  context: Partial<EngineContext>;
  record: EngineRecord | undefined;
  has_actor: boolean;
  /** The role and hashed inputs it was applied with, when the controller holds them in memory. */
  role?: string;
  applied_inputs?: Record<string, unknown> | null;
}

export interface ObserveOptions {
  /** Probe liveness of every handle (true), or reuse `cache` for handles seen before (a light observation after a transition). */
  probe: boolean;
  /** Check that captured engines hold their API key as recorded (controller start and resync). */
  key: boolean;
  /** Check the health of captured engines, counting strikes (the controller's resync). */
  health: boolean;
  /** What runs; null: do not list (a light observation keeps the last list). */
  owned: Owned | null;
  /**
   * Launch tokens of the handles known when `owned` was asked for: the listing speaks for those only. A handle
   * recorded while it was taken (a start that completed meanwhile) is asked of its backend: the listing may
   * show its container as the start had just created it, not running. Absent: every handle.
   */
  listedFor?: ReadonlySet<string>;
  /** Liveness by launch token from the last probing observation; updated in place when probing. */
  cache?: Map<string, Liveness>;
  /** The node faults behind `cache`'s "unknown" entries, by launch token; updated in place when probing. */
  faults?: Map<string, NodeFault>;
  /** Consecutive unhealthy observations per engine; updated in place when checking health. */
  strikes?: Map<string, number>;
  /** Health checks failed in a row before an engine counts as unhealthy. */
  unhealthyStrikes?: number;
  secrets: string[];
  serving: ServingFleet | null;
  /** The latest proof of each pair, as recorded (state/narwhal.json `proofs`); absent: none. */
  proofs?: Record<string, ObservedProof>;
  /** The controller has just started: what is found wrong was found at its start (the operator reads it so). */
  atStart?: boolean;
  /** Engines `narwhal suspend` holds, with since when (state `suspended`); absent: none. */
  suspended?: Record<string, string>;
  /** Engines `narwhal retry` asked a fresh attempt budget for; absent: none. */
  retry?: ReadonlySet<string>;
  /**
   * Reads the applied inputs a record names by reference (state/applied-inputs.ts), for an engine
   * desired at other inputs than it was applied with: only a change needs them (its fields, the URL a
   * held engine still answers on). Absent: left unread (null), as are those of unchanged engines.
   */
  inputs?: {
    desiredHash: ReadonlyMap<string, string>;
    read: (value: AppliedInputs | undefined) => Promise<Record<string, unknown> | null>;
  };
}

/** Each desired engine's input hash, for ObserveOptions.inputs. */
export function desiredHashes(desired: Pick<DesiredState, "specs">): Map<string, string> {
  return new Map(desired.specs.map((s) => [s.name, s.input_hash]));
}

/** The engine's applied inputs as a plan needs them: in memory, or read from their file when desired/ changed them. */
async function appliedInputsOf(
  k: KnownEngine,
  appliedHash: string,
  opts: ObserveOptions,
): Promise<Record<string, unknown> | null> {
  if (k.applied_inputs !== undefined) return k.applied_inputs;
  const value = k.record?.applied_inputs ?? null;
  if (!isInputsRef(value)) return value;
  const wanted = opts.inputs?.desiredHash.get(k.engine);
  return opts.inputs && wanted !== undefined && wanted !== appliedHash ? opts.inputs.read(value) : null;
}

/** What the state file knows, as KnownEngine (no controller: `narwhal plan`). */
export function knownFromRecords(records: Iterable<EngineRecord>): KnownEngine[] {
  return [...records].map((r) => ({
    engine: r.engine,
    phase: r.phase,
    context: recordContext(r),
    record: r,
    has_actor: false,
  }));
}

/** What one probe of an engine found: its liveness, and its node's fault when the node could not be used. */
interface Seen {
  liveness: Liveness;
  fault: NodeFault | null;
}

/** What the listing this observation just made found, by process identity (absent: no listing made). */
type Listed = Map<string, OwnedEngine>;

/** A handle's identity in a listing: a container by its id; a process by its node's boot id, pid and start tick. */
const listedKey = (handle: EngineHandle): string =>
  handle.kind === "container"
    ? `container:${handle.container_id}`
    : `native:${handle.boot_id}:${handle.pid}:${handle.start_ticks}`;

function listedEngines(owned: Owned | null): Listed {
  const listed: Listed = new Map();
  for (const { owned: o } of owned ?? []) listed.set(listedKey(o.handle), o);
  return listed;
}

/**
 * Liveness from that listing, when it found the handle's engine under its launch token and says
 * whether it runs: one labelled list call answers for every container engine, and one scan of a node's
 * process table for every native engine there, not an inspect or a /proc read each (issue 14; over ssh
 * a native engine's isAlive is two commands on its node, its boot id and its stat). Anything else (not
 * listed, a listing that cannot tell) is asked of the backend.
 */
function listedLiveness(handle: EngineHandle, listed: Listed): Seen | null {
  const found = listed.get(listedKey(handle));
  if (found?.launch_token !== handle.launch_token || found.running === undefined) return null;
  return { liveness: found.running ? "alive" : "gone", fault: null };
}

async function livenessOf(
  world: World,
  engine: string,
  handle: EngineHandle,
  opts: ObserveOptions,
  told: NodeFaults,
  listed: Listed,
): Promise<Seen> {
  const cached = opts.cache?.get(handle.launch_token);
  if (!opts.probe && cached !== undefined)
    return { liveness: cached, fault: opts.faults?.get(handle.launch_token) ?? null };
  const fromList = !opts.listedFor || opts.listedFor.has(handle.launch_token) ? listedLiveness(handle, listed) : null;
  const seen = fromList ?? (await world.observeLiveness(handle));
  opts.cache?.set(handle.launch_token, seen.liveness);
  if (seen.fault) {
    opts.faults?.set(handle.launch_token, seen.fault);
    told.note(engine, seen.fault);
  } else opts.faults?.delete(handle.launch_token);
  return seen;
}

async function observeEngine(
  world: World,
  k: KnownEngine,
  opts: ObserveOptions,
  told: NodeFaults,
  listed: Listed,
  planOf: PlanOf,
): Promise<ObservedEngine> {
  const ctx = k.context;
  const handle = ctx.handle ?? null;
  const seen = handle ? await livenessOf(world, k.engine, handle, opts, told, listed) : null;
  const liveness = seen?.liveness ?? null;
  let problem: string | null = null;
  if (handle && liveness === "gone") {
    const reason = await world.lostReason(ctx as EngineContext, opts.secrets);
    problem = opts.atStart ? `found stopped at controller start (${reason})` : reason;
  } else if (handle && liveness === "alive" && ctx.run) {
    // Any engine narwhal started must hold its key (a security promise); health is judged once it serves.
    const wantHealth = !!opts.health && k.phase === "captured";
    const { key, health } =
      opts.key || wantHealth
        ? await world.servingProblems(handle, ctx.run.dir, { key: !!opts.key, health: wantHealth }, planOf)
        : { key: null, health: null };
    if (key !== null)
      problem = opts.atStart
        ? `found at controller start without its API key as recorded: ${key}`
        : `it does not hold its API key as recorded: ${key}`;
    else if (wantHealth) {
      const strikes = health === null ? 0 : (opts.strikes?.get(k.engine) ?? 0) + 1;
      opts.strikes?.set(k.engine, strikes);
      if (health !== null && strikes >= (opts.unhealthyStrikes ?? 2)) {
        opts.strikes?.delete(k.engine);
        problem = `unhealthy: ${health}`;
      }
    }
  }
  const retiring = ctx.retiring ?? null;
  const appliedHash = ctx.desiredHash ?? k.record?.desired_hash ?? "";
  const retiringSeen = retiring ? await livenessOf(world, k.engine, retiring.handle, opts, told, listed) : null;
  // A node the engine's step failed on, or its observation now: it blocks only this engine (planner, rollout).
  const stepFault = k.phase === "failed" ? nodeFaultOf(ctx.error) : null;
  return {
    engine: k.engine,
    role: k.role ?? k.record?.role ?? null,
    backend: k.record?.backend ?? handle?.kind ?? "native",
    phase: k.phase,
    applied_hash: appliedHash,
    applied_inputs: await appliedInputsOf(k, appliedHash, opts),
    running_hash: ctx.runningHash ?? null,
    group_signature: ctx.inspection?.group_signature ?? k.record?.group_signature ?? null,
    nixl_hash: ctx.checked?.nixl_compat_hash ?? k.record?.checked?.nixl_compat_hash ?? null,
    model_tree_sha256: ctx.inspection?.model_tree_sha256 ?? k.record?.inspection?.model_tree_sha256 ?? null,
    tensor_parallel_size: (ctx.layout ?? k.record?.layout)?.tensor_parallel_size ?? null,
    block_size: (ctx.layout ?? k.record?.layout)?.block_size ?? null,
    terminal: ctx.terminal ?? false,
    retry_at: ctx.retryAt ?? null,
    handle,
    liveness,
    problem,
    retiring: retiring
      ? {
          handle: retiring.handle,
          hash: retiring.hash ?? null,
          liveness: retiringSeen!.liveness,
        }
      : null,
    node_fault: seen?.fault ?? retiringSeen?.fault ?? stepFault,
    deferred: ctx.deferred ?? null,
    has_actor: k.has_actor,
    halted: k.record?.halted ?? null,
  };
}

async function ownedObserved(owned: Owned, planOf: PlanOf): Promise<OwnedObserved[]> {
  return Promise.all(
    owned.map(async ({ owned: o }) => {
      const plan = o.run_dir ? await planOf(o.run_dir).catch(() => null) : null;
      const adoptable = plan !== null && plan.launch_token === o.launch_token && plan.engine === o.engine;
      return {
        engine: o.engine,
        launch_token: o.launch_token,
        handle: o.handle,
        run_dir: o.run_dir ?? null,
        input_hash: plan?.input_hash ?? null,
        adoptable,
      };
    }),
  );
}

/** Launch tokens of the engines' handles (the running one and a retiring one): whom a listing taken now speaks for. */
export function handleTokens(known: readonly KnownEngine[]): Set<string> {
  const tokens = new Set<string>();
  for (const { context } of known)
    for (const h of [context.handle, context.retiring?.handle]) if (h) tokens.add(h.launch_token);
  return tokens;
}

/** One observation of every known engine and of what runs. */
export async function observe(
  world: World,
  known: KnownEngine[],
  lastOwned: OwnedObserved[],
  opts: ObserveOptions,
): Promise<Observed> {
  const engines: Record<string, ObservedEngine> = {};
  // Each run's plan read once an observation: an engine's checks and the scan of what runs both ask for it.
  const planOf = planReads();
  // Engines are observed side by side: a full observation of a large fleet is bounded by its slowest engine, not their sum.
  const told = new NodeFaults();
  const listed = listedEngines(opts.owned);
  const observed = await Promise.all(known.map((k) => observeEngine(world, k, opts, told, listed, planOf)));
  world.report(told);
  for (const e of observed) engines[e.engine] = opts.retry?.has(e.engine) ? { ...e, retry_requested: true } : e;
  const claimed = claimedTokens(
    known.flatMap((k) => [k.context, recordContext(k.record)]),
    known.map((k) => k.record?.handle ?? null),
  );
  // Without a scan, what runs is the last scan's list less what is no longer claimed: the controller
  // stopped those itself since (a replaced engine's old process, a swept orphan), so they are not
  // orphans to stop again. What no one claimed at the scan was swept after it; new orphans wait for a scan.
  const owned =
    opts.owned === null
      ? lastOwned.filter((o) => claimed.has(o.launch_token))
      : await ownedObserved(opts.owned, planOf);
  const unlisted = world.unlistedNodes();
  return {
    at: new Date().toISOString(),
    engines,
    owned,
    claimed: [...claimed].sort(),
    serving: opts.serving,
    proofs: opts.proofs ?? {},
    ...(unlisted.length ? { unlisted } : {}),
    ...(opts.suspended && Object.keys(opts.suspended).length ? { suspended: opts.suspended } : {}),
  };
}
