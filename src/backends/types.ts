// One interface, two implementations: where an engine runs (a process group on
// the host, or a container through the Docker Engine API). Phases are written
// against this interface only.
import type { EngineSpec } from "../desired/types.js";
import type { EngineHandle, PreparedRun } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";
import type { EngineLog } from "./engine-log.js";
import type { NodeFault } from "../errors.js";

export type { EngineLog } from "./engine-log.js";

export interface RuntimeCheckOutput {
  /** Unique id of this inspection (a process or temporary container). */
  inspection_id: string;
  exit_code: number | null;
  stdout: string;
  stderr: string;
  /** Set when the inspection was cut off by a deadline: which one, and the variable that sets it (the output is partial). */
  deadline?: { message: string; input: string };
}

export interface ListOwnedOptions {
  startup?: boolean;
  /** Also the stopped containers kept as a failed start's evidence (down removes them; nothing else acts on them). */
  keptFailures?: boolean;
  /**
   * A node (or its Docker endpoint) that could not be listed for a node fault (unreachable, host key,
   * auth): given, the others are listed still and the node is told here; absent, the fault is thrown.
   */
  unlisted?(fault: NodeFault): void;
}

export interface OwnedEngine {
  engine: string;
  launch_token: string;
  handle: EngineHandle;
  /** The run directory it was started from, when the engine says (process cwd, container label). */
  run_dir?: string;
  /**
   * Whether it runs, as the listing that found it says (a container's state in the labelled list):
   * an observation made with this listing needs no inspect per engine. Absent: the listing cannot tell.
   */
  running?: boolean;
}

/** A running engine's process as the host sees it: evidence for shared startup. */
export interface ProcessDescription {
  /** Linux PID on the host (a container's main process), null when not running. */
  pid: number | null;
  /** The serving arguments the process runs with. */
  args: string[];
  container_id?: string;
  image_id?: string;
  boot_id?: string;
  start_ticks?: number;
}

export interface EngineBackend {
  readonly kind: EngineSpec["backend"];
  /** Image id, or the native runtime's identity; part of the group signature. */
  runtimeIdentity(spec: EngineSpec, signal: AbortSignal): Promise<string>;
  /** How long runCheck lets the check run before it ends it (what the check's live line counts towards). */
  readonly checkDeadlineMs: number;
  /** Run the check script inside the engine's runtime. */
  runCheck(
    run: PreparedRun,
    plan: LaunchPlan,
    scriptPath: string,
    inputPath: string,
    signal: AbortSignal,
  ): Promise<RuntimeCheckOutput>;
  /** Find this run's engine (by launch token) or start it; never starts a second one. */
  ensureStarted(run: PreparedRun, plan: LaunchPlan, signal: AbortSignal): Promise<EngineHandle>;
  /** The engine still runs as the recorded identity. */
  isAlive(handle: EngineHandle): Promise<boolean>;
  /** What about the running engine does not match the plan (empty: it is this plan's engine). */
  identityProblems(handle: EngineHandle, plan: LaunchPlan): Promise<string[]>;
  /**
   * What about the engine's API key file differs from the run's (missing, mode, digest); empty when
   * intact or when the backend hands the key over otherwise (native: the process environment).
   */
  keyProblems(handle: EngineHandle, run: Pick<PreparedRun, "engine" | "dir">, plan: LaunchPlan): Promise<string[]>;
  /** Unix time the engine process started, to compare with /metrics' process_start_time_seconds. */
  processStartTime(handle: EngineHandle): Promise<number | null>;
  /** The engine's process identity (PID, arguments; container and image id or boot id and start tick). */
  describeProcess(handle: EngineHandle): Promise<ProcessDescription>;
  /** Stop gracefully, then forcibly after graceMs. Stopping a stopped engine succeeds. */
  stop(handle: EngineHandle, graceMs: number): Promise<void>;
  /**
   * A start that failed: stop the engine but keep it as evidence (seed 000 "use the recorded container
   * ID ... trace the failure"), its state saved in the run directory; says what was kept, or null when
   * nothing could be kept (the caller then stops it). Absent: the backend only stops (native).
   */
  keepFailedStart?(run: PreparedRun, handle: EngineHandle, graceMs: number): Promise<string | null>;
  /**
   * The engine's log (stdout+stderr), bounded by the cap: evidence, read best-effort. Never
   * throws; a copy that could not be completed says so in `problem` and where the log still is.
   * `tailBytes`: the caller quotes only the log's last lines, so only that much of the log's end is
   * read, and nothing copied; except the first read of a dead container's log, which is copied whole
   * into the run directory (the daemon's copy goes with the container).
   */
  startupLog(run: PreparedRun, handle: EngineHandle, opts?: { tailBytes?: number }): Promise<EngineLog>;
  /**
   * Every engine this state directory owns, plus leftovers of its temporary inspections: all of
   * them when `startup` (the lock holder has started none yet), else only those past their deadline.
   */
  listOwned(opts?: ListOwnedOptions): Promise<OwnedEngine[]>;
  /** Learn the endpoints the desired engines use (the container backend lists orphans on each). */
  knowHosts?(specs: EngineSpec[]): void;
}
