// The data the planner decides on and the data it returns. Pure types: the
// controller fills `Observed` (observe.ts) and executes `Plan`; `narwhal plan`
// prints it and saves it; `narwhal apply` compares it. Nothing here does IO.
import type { EngineHandle } from "../phases/types.js";
import type { ProofCause } from "../phases/kv-proof.js";
import type { NodeFault } from "../errors.js";

/** What could be observed of a process or container: alive, gone, or not observable now (never acted on by guess). */
export type Liveness = "alive" | "gone" | "unknown";

/** One desired engine, as the planner sees it: no secrets (the API key is only its digest in `inputs`). */
export interface DesiredEngine {
  engine: string;
  role: string;
  backend: string;
  /** Fleet record fields the serving fleet lists (seed 003). */
  iid: string;
  url: string;
  attestation_url: string;
  input_hash: string;
  /** inputHashMaterial(spec): the hashed inputs, to name the fields a change touches. */
  inputs: Record<string, unknown>;
}

/** `rollout` in fleet.json, with defaults applied (src/desired). */
export interface RolloutPolicy {
  /** Per role: how many engines of that role a rollout may have out of service at once (a count, or "25%"). Roles absent: `default`. */
  max_unavailable: Record<string, number | string>;
  /** For roles not named in max_unavailable (default 1). */
  default_max_unavailable: number | string;
  /**
   * Changes that alter the group signature (old and new engines cannot pair):
   * "pd_units" (default) moves prefill and decode engines together, one P/D unit at a time;
   * "recreate" releases them all at once (downtime accepted, max_unavailable ignored for them).
   */
  incompatible: "pd_units" | "recreate";
}

/** `kv_transfer` in fleet.json, with defaults applied (src/desired/kv-policy.ts): how KV transfer is proven. */
export interface KvPolicy {
  /** false: no proofs (pairs serve by group as before); default true. */
  prove: boolean;
  /** A failed proof: "restart_decode" (default) restarts the decode (up to max_decode_restarts in a row), "hold" keeps it out of serving. */
  on_failure: "restart_decode" | "hold";
  /** A prefill replaced or restarted: "reprove" (default) proves its decodes again; "restart_decodes" restarts its proven decodes first. */
  on_prefill_restart: "reprove" | "restart_decodes";
  /** Restarts of a decode after failed proofs of one pair in a row (default 1); past it the pair is held. */
  max_decode_restarts: number;
  /** Watch mode: seconds between scrapes of the decodes' KV metrics (0: off); default 30. The lead's timer reads it. */
  watch_interval_s: number;
}

export interface DesiredForPlan {
  engines: DesiredEngine[];
  rollout: RolloutPolicy;
  kv: KvPolicy;
}

/** One engine as observed: the controller's view of it (its actor, or its state record when no controller runs) and what runs. */
export interface ObservedEngine {
  engine: string;
  /** Role and backend it was applied with (null: unknown, e.g. a record from before roles were kept). */
  role: string | null;
  backend: string;
  /** Phase of its actor or record: pending … captured, failed, replacing, removing, removed. */
  phase: string;
  /** The input hash the controller last applied to it (APPLIED). */
  applied_hash: string;
  /**
   * inputHashMaterial of the applied spec; null when not recorded (old state files, a missing inputs file),
   * or not read: a record's inputs are read only when desired/ changed them (observe.ts).
   */
  applied_inputs: Record<string, unknown> | null;
  /** Input hash of the engine that runs (RUNNING); null when none runs. */
  running_hash: string | null;
  group_signature: string | null;
  terminal: boolean;
  /** A failed engine's backoff deadline (epoch ms). */
  retry_at: number | null;
  handle: EngineHandle | null;
  /** Liveness of `handle` (null: no handle). */
  liveness: Liveness | null;
  /** Why a recorded engine is gone, or holds no key as recorded, or is unhealthy past its strikes (null: nothing wrong observed). */
  problem: string | null;
  /** The engine kept serving old inputs while its replacement is prepared. */
  retiring: { handle: EngineHandle; hash: string | null; liveness: Liveness } | null;
  /** A desired-state event held until a step that cannot be abandoned (start, stopping the retiring engine) settles. */
  deferred: { desiredHash?: string; remove?: boolean } | null;
  /** Whether the controller holds an actor for it (false: a state record only — e.g. `narwhal plan` with no controller). */
  has_actor: boolean;
  /** A rollout that halted on this engine (its replacement failed), as recorded: see Plan.halted. */
  halted?: string | null;
  /**
   * The node this engine's observation or failed step could not use (unreachable, host key, auth):
   * it blocks this engine only, never a rollout on other nodes. Absent or null: none known.
   */
  node_fault?: NodeFault | null;
  /**
   * The recorded NIXL compatibility hash of its checked run (nixl-compat.json); null: not recorded.
   * Optional until observe fills it: absent reads as null (not recorded).
   */
  nixl_hash?: string | null;
  /** `narwhal retry` asked for a fresh attempt budget (a terminal failure is retried now). Absent: not asked. */
  retry_requested?: boolean;
  /**
   * What pairs it beside the NIXL hash (kv-pairs.ts): the tree digest of the model it inspected,
   * and the TP size and KV block size it captured (vLLM's handshake compares those; the hash
   * leaves them out). Optional until observe fills them: absent reads as null (not recorded).
   */
  model_tree_sha256?: string | null;
  tensor_parallel_size?: number | null;
  block_size?: number | null;
}

/** Something this state directory started that runs (containers by label, processes by recorded identity). */
export interface OwnedObserved {
  engine: string;
  launch_token: string;
  handle: EngineHandle;
  run_dir: string | null;
  /** Input hash of its plan, when its run directory could be read. */
  input_hash: string | null;
  /** Whether a usable run directory of this engine stands behind it (an adoption candidate). */
  adoptable: boolean;
}

export interface ServingEngine {
  iid: string;
  url: string;
  attestation_url: string;
  role: string;
  /** Not in seed 003's record; kept beside it so a reader can check pairing. */
  engine: string;
  group_signature: string;
}

/** state/serving-fleet.json: what a router may send traffic to now. */
export interface ServingFleet {
  /**
   * The cache-equivalence group of the prefill/decode engines listed, when they all share one;
   * null when none is listed or they span several groups (a pairing class holds engines of several
   * TP sizes: each engine's own group is in its record). Kept because status and plan render read it.
   */
  group_signature: string | null;
  /**
   * What the listed prefill/decode engines pair by (kv-pairs.ts pairingClass): their NIXL
   * compatibility hash and model tree digest, or `group <signature>` for engines whose hash is not
   * recorded. null: none listed. Absent in files written before pairing followed the NIXL hash.
   */
  pairing_class?: string | null;
  engines: ServingEngine[];
  /**
   * The proven prefill → decode pairs among the listed engines (every listed prefill × listed decode:
   * the router pairs any of them). Absent in files written before proofs; the planner always fills it.
   */
  pairs?: Array<{ prefill: string; decode: string }>;
}

/** One engine of a pair as proven: the instance (launch token) it ran as. */
export interface ProofEnd {
  engine: string;
  launch_token: string;
  run_dir: string | null;
  node: string | null;
}

/** Why a proof failed: the proof's own verdict (src/phases/kv-proof.ts), kept as it named it. */
export type { ProofCause };

/** The latest proof of one prefill → decode pair (state/narwhal.json `proofs`, keyed by pairKey). */
export interface ObservedProof {
  prefill: ProofEnd;
  decode: ProofEnd;
  passed: boolean;
  cause: ProofCause | null;
  message: string;
  at: string;
  /** "proof": a transfer proof ran; "watch": the periodic scrape of the decode found decode-only or failures (no proof ran). */
  source: "proof" | "watch";
  /** Consecutive failed proofs of this pair across instances (0 after a pass): bounds decode restarts. */
  failures: number;
}

/** The key of a pair in Observed.proofs and state/narwhal.json `proofs`. */
export const pairKey = (prefill: string, decode: string): string => `${prefill}>${decode}`;

export interface Observed {
  /** ISO time of the observation (not part of the fingerprint). */
  at: string;
  engines: Record<string, ObservedEngine>;
  owned: OwnedObserved[];
  /** Launch tokens some record or actor still stands for: anything else owned is an orphan. */
  claimed: string[];
  /** What serving-fleet.json lists now (null: not written yet). */
  serving: ServingFleet | null;
  /**
   * Nodes whose engines could not be listed (their node could not be used): an engine with no
   * record there may still run, so none is created there on a guess. Absent: every node listed.
   */
  unlisted?: NodeFault[];
  /**
   * The latest proof of each prefill → decode pair, keyed by pairKey (empty: none). Optional until
   * observe fills it: absent reads as no proofs (nothing is proven on a guess).
   */
  proofs?: Record<string, ObservedProof>;
  /**
   * Engines `narwhal suspend` holds, each with the ISO time it was suspended: observed, never changed
   * (no start, stop, replace, restart, removal, adoption, sweep, or proof through it). Absent: none.
   */
  suspended?: Record<string, string>;
}

/** One input field a change touches: a JSON path into the engine's inputs. */
export interface FieldChange {
  /** e.g. "launch.runtime.extra_args[2]", "launch.image", "launch.tensor_parallel_size", "model.revision". */
  path: string;
  old: unknown;
  new: unknown;
  /** The field feeds the group signature: old and new engines cannot pair. */
  group: boolean;
}

export type Action =
  | { kind: "create"; engine: string; role: string; reason: string }
  | {
      kind: "replace";
      engine: string;
      role: string;
      from_hash: string;
      to_hash: string;
      /** null when the applied inputs were not recorded (the fields cannot be named). */
      fields: FieldChange[] | null;
      group_changes: boolean;
      reason: string;
    }
  | { kind: "restart-lost"; engine: string; reason: string }
  /** A terminally failed engine that a new controller run gives a fresh attempt budget. */
  | { kind: "retry"; engine: string; reason: string }
  | { kind: "remove"; engine: string; reason: string }
  /** An engine with no usable record whose running engine is taken over (its run directory says how far it got). */
  | { kind: "adopt"; engine: string; launch_token: string; reason: string }
  | { kind: "sweep-orphan"; engine: string; launch_token: string; handle: EngineHandle; reason: string }
  /** A retiring engine found gone: the replacement goes on without it. */
  | { kind: "forget-retiring"; engine: string; reason: string }
  /** Nothing is done for this engine now, and why (a held rollout, a step that cannot be abandoned, an unobservable engine). */
  | {
      kind: "wait";
      engine: string;
      why: string;
      /** "suspended": `narwhal suspend` holds it; nothing is done for it until `narwhal resume`. */
      until: "rollout" | "step" | "observation" | "halted" | "backoff" | "suspended";
    }
  /** A transfer proof of the pair prefill → engine (the decode; its queue key: proofs of one decode never overlap). */
  | { kind: "prove"; engine: string; prefill: string; reason: string }
  /** The decode restarted because its pair with `prefill` is not proven (a failed proof, or policy on a prefill restart). */
  | { kind: "restart-unproven"; engine: string; prefill: string; reason: string };

export type ActionKind = Action["kind"];

/** One step of a rollout: engines whose change is released together. */
export interface RolloutStep {
  engines: string[];
  /** The change alters the group signature. */
  incompatible: boolean;
  /** "now": released by this plan; "later": after the steps before it converge; "halted": a replacement of this rollout failed. */
  status: "now" | "later" | "halted";
}

export interface Plan {
  /** Every action, in the order the controller executes them. */
  actions: Action[];
  /** The rollout of pending changes, in order (empty: none). */
  rollout: RolloutStep[];
  /** Engines whose failed replacement halted a rollout, and why. */
  halted: Array<{ engine: string; why: string }>;
  /** What serving-fleet.json should list after this plan's observation. */
  serving: ServingFleet;
  /** Findings that change nothing but an operator must read (e.g. no compatible prefill/decode pair). */
  warnings: string[];
  /** True when anything would change (exit 2 of `narwhal plan`); waits alone are no change. */
  changes: boolean;
}

export interface PlanPolicy {
  rollout: RolloutPolicy;
  /** Whether this plan is for a controller that has just started (adoption, orphan sweep and fresh-attempt rules apply). */
  startup: boolean;
}
