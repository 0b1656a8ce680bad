// Observing the world the controller acts on: whether a recorded engine still
// runs (and is healthy, and enforces its API key), why it stopped, which engines this state directory
// owns, and which of those no record claims (orphans). Observation wins over
// any snapshot; an engine that cannot be observed is never acted on by guess.
import type { EngineContext } from "../../machines/engine.js";
import type { EngineSpec } from "../desired/types.js";
import type { EngineBackend, OwnedEngine } from "../backends/types.js";
import type { EngineHandle } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";
import { readPlan } from "../phases/prepare.js";
import { httpGets, type HttpResponse } from "../phases/http.js";
import { keyChecks, keyFindings, planHasKey } from "../phases/key-enforcement.js";
import { nodeFaultOf, PhaseError, type NodeFault } from "../errors.js";
import type { Logger } from "../log.js";
import { lostReason } from "./engine-gone.js";
import type { Liveness } from "./plan-types.js";
import type { NodeFaults } from "./node-faults.js";
import { stopEngineAndSidecar, type SidecarDeps } from "../phases/attestation-sidecar.js";

export type Owned = Array<{ backend: EngineBackend; owned: OwnedEngine }>;

/** A run's launch plan. */
export type PlanOf = (runDir: string) => Promise<LaunchPlan>;

const readPlanOf: PlanOf = (runDir) => readPlan(runDir).then((r) => r.plan);

/** Plans read at most once each, for the life of the returned reader (one observation: plans are immutable). */
export function planReads(): PlanOf {
  const reads = new Map<string, Promise<LaunchPlan>>();
  return (runDir) => {
    let read = reads.get(runDir);
    if (!read) reads.set(runDir, (read = readPlanOf(runDir)));
    return read;
  };
}

/** Launch tokens that some engine context still stands for: anything else running is an orphan. */
export function claimedTokens(
  contexts: Iterable<Partial<EngineContext> | undefined>,
  handles: Iterable<EngineHandle | null> = [],
): Set<string> {
  const tokens = new Set<string>();
  for (const c of contexts) {
    if (c?.run) tokens.add(c.run.launch_token);
    if (c?.handle) tokens.add(c.handle.launch_token);
    if (c?.retiring) tokens.add(c.retiring.handle.launch_token);
  }
  for (const h of handles) if (h) tokens.add(h.launch_token);
  return tokens;
}

export class World {
  constructor(
    private readonly backends: Record<EngineSpec["backend"], EngineBackend>,
    private readonly log: Logger,
    private readonly stopGraceMs: number,
    /** Where attestation sidecars run: an engine's stop stops its sidecar too. */
    private readonly sidecars?: SidecarDeps,
  ) {}

  /**
   * Whether the engine runs as recorded; "unknown" when that cannot be observed now (daemon or node
   * unreachable): never act on a guess. A node that cannot be used is returned as its fault, for the
   * caller to tell once per node (NodeFaults) and to show as NodeReachable=False.
   */
  async observeLiveness(handle: EngineHandle): Promise<{ liveness: Liveness; fault: NodeFault | null }> {
    try {
      return { liveness: (await this.backends[handle.kind].isAlive(handle)) ? "alive" : "gone", fault: null };
    } catch (err) {
      const fault = nodeFaultOf(err);
      if (!fault)
        this.log.warn(
          `cannot observe engine ${handle.kind === "native" ? `pid ${handle.pid}` : handle.container_id.slice(0, 12)}: ${(err as Error).message}`,
        );
      return { liveness: "unknown", fault };
    }
  }

  /** Tell the nodes an observation could not use, once per node. */
  report(faults: NodeFaults): void {
    faults.report(this.log);
  }

  /** What the engine's own log says last, so a lost engine's failure names its cause. */
  async lostReason(ctx: EngineContext, secrets: string[]): Promise<string> {
    if (!ctx.handle || !ctx.run) return "exited";
    return lostReason(this.backends[ctx.handle.kind], ctx.run, ctx.handle, secrets);
  }

  /**
   * What an observation of a running engine finds wrong with its API key and, when asked, its health,
   * over one connection (the key checks' GETs and /health pipelined: a resync opened two an engine).
   * key: null when an engine with a key enforces it (401 without it), takes the run's own key, and its
   * key file is as recorded (mode, digest), else the cause. What cannot be observed (daemon or engine
   * not answering) is not a key problem: liveness and health deal with it, nothing is acted on by guess.
   * health: null when /health answers 200 (or was not asked), else what it did instead.
   */
  async servingProblems(
    handle: EngineHandle,
    runDir: string,
    want: { key: boolean; health: boolean },
    planOf: PlanOf,
  ): Promise<{ key: string | null; health: string | null }> {
    let plan: LaunchPlan;
    try {
      plan = await planOf(runDir);
    } catch (err) {
      // An unreadable plan is the integrity checks' finding, not a key's.
      return { key: null, health: want.health ? `/health did not answer: ${(err as Error).message}` : null };
    }
    const problems: string[] = [];
    let checkKey = want.key && planHasKey(plan);
    if (checkKey) {
      try {
        problems.push(
          ...(await this.backends[handle.kind].keyProblems(handle, { engine: plan.engine, dir: runDir }, plan)),
        );
      } catch (err) {
        if (err instanceof PhaseError) return { key: err.message, health: null }; // the run's own key is gone: nothing can prove the engine's
        this.log.warn(`cannot observe the API key of ${plan.engine}'s engine: ${(err as Error).message}`, {
          engine: plan.engine,
        });
        checkKey = false;
      }
    }
    const keyGets = checkKey ? await keyChecks(runDir) : [];
    const gets = [...keyGets, ...(want.health ? [{ path: "/health" }] : [])];
    // Each answer within 5 s of the one before (as when they were separate requests); what gets no answer
    // is no key finding, and /health's failure is health's, whatever the key checks' answers were.
    // (A request that cannot even be sent, a key with a line break in it, fails each GET alike.)
    const answers = await httpGets(plan.endpoint, gets, { timeoutMs: 5000 }).catch((err: unknown) =>
      gets.map(() => err as Error),
    );
    const answered = (a: HttpResponse | Error | undefined) => (a instanceof Error ? undefined : a);
    problems.push(...keyFindings(answers.slice(0, keyGets.length).map(answered)));
    const h = answers[keyGets.length];
    const health = !want.health
      ? null
      : h instanceof Error
        ? `/health did not answer: ${h.message}`
        : h && h.status !== 200
          ? `/health answered ${h.status}`
          : null;
    return { key: problems.length ? problems.join("; ") : null, health };
  }

  stop(handle: EngineHandle): Promise<void> {
    return stopEngineAndSidecar(this.backends[handle.kind], handle, this.stopGraceMs, this.sidecars);
  }

  /** The nodes the last listOwned could not list, with why (what runs there is not known). */
  private unlisted = new Map<string, NodeFault>();

  /** Nodes whose engines the last listing could not see: nothing is created there on a guess (an engine may run). */
  unlistedNodes(): NodeFault[] {
    return [...this.unlisted.values()];
  }

  /** `keptFailures`: also failed starts' containers kept as evidence (only `down` removes what it lists). */
  async listOwned(startup = false, keptFailures = false): Promise<Owned> {
    this.unlisted = new Map();
    // The backends at once (each lists its nodes at once): their nodes may be the same, or not.
    const perBackend = await Promise.all(
      [...new Set(Object.values(this.backends))].map(async (backend): Promise<Owned> => {
        const unlisted = (fault: NodeFault) => {
          this.unlisted.set(fault.node, fault);
          this.log.warn(
            `cannot list ${backend.kind} engines on node ${fault.node} to find orphans (${fault.message}); none of them is swept, adopted or created on a guess until it answers`,
          );
        };
        try {
          return (await backend.listOwned({ startup, unlisted, keptFailures })).map((owned) => ({ backend, owned }));
        } catch (err) {
          // Nothing it runs is listed, so nothing of it is swept as an orphan or taken for gone.
          const fault = nodeFaultOf(err);
          if (fault) unlisted(fault);
          else this.log.warn(`cannot list ${backend.kind} engines to find orphans: ${(err as Error).message}`);
          return [];
        }
      }),
    );
    return perBackend.flat();
  }
}
