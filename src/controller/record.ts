// Turning an engine actor's snapshot into its state-file record: what
// `narwhal status` shows and what a restarted controller resumes from.
import type { EngineContext } from "../../machines/engine.js";
import type { Condition, EngineRecord } from "../state/store.js";
import { failureOf, nodeFaultOf, type NodeFault } from "../errors.js";
import { KV_CONDITION, notServing } from "./kv-condition.js";
import { withoutRunFiles } from "../state/evidence-refs.js";

const h8 = (h: string | null | undefined) => (h ? h.slice(0, 8) : "-");
const pascal = (phase: string) => phase.charAt(0).toUpperCase() + phase.slice(1);

/**
 * Conditions with positive polarity, as Kubernetes reports them: each is True when what its
 * name says holds (Ready, UpToDate, Failed), with a reason and a message, and its
 * lastTransitionTime moves only when its status changes.
 */
export function conditionBuilder(prev: readonly Condition[] | undefined, now: string) {
  return (type: string, status: boolean, reason: string, message: string): Condition => {
    const was = prev?.find((p) => p.type === type);
    const value = status ? "True" : "False";
    return {
      type,
      status: value,
      reason,
      message,
      lastTransitionTime: was?.status === value && was.lastTransitionTime ? was.lastTransitionTime : now,
    };
  };
}

const NODE_REASON: Record<NodeFault["reason"], string> = {
  unreachable: "Unreachable",
  "host-key": "HostKeyRejected",
  auth: "AuthFailed",
};

/**
 * What is known of the engine's node now: it failed a step or an observation (`fault`), or it just
 * answered one (`answered`: what it answered). No evidence (null) keeps what was known.
 */
export type NodeEvidence = { fault: NodeFault } | { answered: string } | null;

/**
 * NodeReachable, kept once the engine's node has failed it (absent before: a node that never
 * failed needs no line in status): False with the fault's reason and message, True again once a
 * step or an observation on that node succeeds. Without evidence, what was known stays.
 */
export function nodeReachable(
  prev: readonly Condition[] | undefined,
  evidence: NodeEvidence,
  now: string,
): Condition | null {
  const was = prev?.find((p) => p.type === "NodeReachable") ?? null;
  const c = conditionBuilder(prev, now);
  if (evidence && "fault" in evidence)
    return c("NodeReachable", false, NODE_REASON[evidence.fault.reason], evidence.fault.message);
  if (!was) return null;
  if (evidence && was.status !== "True")
    return c("NodeReachable", true, "Reachable", `its node answered again: ${evidence.answered}`);
  return was;
}

/** The record's conditions with NodeReachable set from `evidence` (the others as they are). */
export function withNodeReachable(conditions: readonly Condition[], evidence: NodeEvidence, now: string): Condition[] {
  const node = nodeReachable(conditions, evidence, now);
  return [...conditions.filter((x) => x.type !== "NodeReachable"), ...(node ? [node] : [])];
}

/** Phases entered by an event (a desired change, a removal, a retry), not by a step that went through. */
const ENTERED_BY_EVENT = new Set(["pending", "removing", "removed", "failed"]);

/**
 * What a transition says about the engine's node: a step that failed on it, or a step that went
 * through (a move from one working state to the next; leaving `failed` is only a retry beginning).
 */
export function stepEvidence(prevPhase: string | undefined, phase: string, ctx: EngineContext): NodeEvidence {
  const fault = phase === "failed" ? nodeFaultOf(ctx.error) : null;
  if (fault) return { fault };
  if (prevPhase === undefined || prevPhase === phase || prevPhase === "failed" || ENTERED_BY_EVENT.has(phase))
    return null;
  return { answered: `the step from ${prevPhase} to ${phase} went through` };
}

export function conditionsFor(
  prev: readonly Condition[] | undefined,
  phase: string,
  ctx: EngineContext,
  now: string,
  node: NodeEvidence = null,
): Condition[] {
  const c = conditionBuilder(prev, now);
  const ready =
    phase === "captured"
      ? c("Ready", true, "Captured", "serving; cache layout captured")
      : c("Ready", false, pascal(phase), `engine is ${phase}`);
  // An engine kept serving during a replacement runs the old hash: it is running, and not up to date.
  const running = ctx.runningHash ?? ctx.retiring?.hash ?? null;
  const upToDate =
    running === null
      ? c("UpToDate", false, "NotRunning", `no engine runs yet; desired input ${h8(ctx.desiredHash)}`)
      : running === ctx.desiredHash
        ? c("UpToDate", true, "HashMatches", `the running engine was started from the desired input ${h8(running)}`)
        : c(
            "UpToDate",
            false,
            "HashDiffers",
            `running input ${h8(running)}, desired input ${h8(ctx.desiredHash)}: being replaced`,
          );
  const e = ctx.error;
  const failure = e ? `${e.step ?? "?"}: ${e.message}` : "";
  const failed = !e
    ? c("Failed", false, "NoFailure", "no step has failed since the engine last converged")
    : phase !== "failed"
      ? c("Failed", false, "Recovering", `attempt ${ctx.attempts + 1} in progress after ${failure}`)
      : ctx.terminal
        ? c("Failed", true, "Terminal", failure)
        : failureOf(e) === "outwait"
          ? c(
              "Failed",
              true,
              "Waiting",
              `${failure} (outside narwhal's control; re-checked${ctx.retryAt ? ` next at ${new Date(ctx.retryAt).toISOString()}` : ""}, using no attempt${ctx.waitingSince ? `, waiting since ${new Date(ctx.waitingSince).toISOString()}` : ""})`,
            )
          : c(
              "Failed",
              true,
              "Retrying",
              `${failure} (attempt ${ctx.attempts} of ${ctx.retry.maxAttempts}${ctx.retryAt ? `, next at ${new Date(ctx.retryAt).toISOString()}` : ""})`,
            );
  const reachable = nodeReachable(prev, node, now);
  // KVTransfer is the proofs' verdict (kv-condition.ts, set after each plan); an engine that stops
  // serving no longer speaks for its pairs, whatever its last proof said.
  const kvWas = prev?.find((x) => x.type === KV_CONDITION);
  const stopped = notServing(phase);
  const kv = !kvWas ? null : phase === "captured" ? kvWas : c(KV_CONDITION, false, stopped.reason, stopped.message);
  return [ready, upToDate, failed, ...(reachable ? [reachable] : []), ...(kv ? [kv] : [])];
}

/** After `narwhal down`: nothing runs, nothing failed. */
export function stoppedConditions(prev: readonly Condition[] | undefined, now: string): Condition[] {
  const c = conditionBuilder(prev, now);
  return [
    c("Ready", false, "Stopped", "stopped by narwhal down"),
    c("UpToDate", false, "NotRunning", "stopped by narwhal down; the next reconcile starts it from a fresh run"),
    c("Failed", false, "NoFailure", "stopped by narwhal down"),
  ];
}

export function recordFrom(
  prev: EngineRecord | undefined,
  phase: string,
  ctx: EngineContext,
  backend: string,
  snapshot: unknown,
  event?: string,
): EngineRecord {
  const now = new Date().toISOString();
  const history = [...(prev?.history ?? [])];
  if (!prev || prev.phase !== phase) {
    const note =
      phase === "failed" && ctx.error ? `${ctx.error.step ?? ""}: ${ctx.error.message}`.slice(0, 300) : undefined;
    history.push({
      at: now,
      from: prev?.phase ?? "none",
      to: phase,
      ...(event ? { event } : {}),
      ...(note ? { note } : {}),
    });
  }
  return {
    engine: ctx.engine,
    backend,
    phase,
    desired_hash: ctx.desiredHash,
    running_hash: ctx.runningHash,
    group_signature: ctx.inspection?.group_signature ?? prev?.group_signature ?? null,
    run_dir: ctx.run?.dir ?? null,
    plan_sha256: ctx.run?.plan_sha256 ?? null,
    handle: ctx.handle,
    inspection: ctx.inspection
      ? {
          accelerator: ctx.inspection.accelerator,
          image_id: ctx.inspection.image_id,
          model_config_sha256: ctx.inspection.model_config_sha256,
          // What pairing compares beside the NIXL hash (kv-pairs.ts); absent in records from before.
          model_tree_sha256: ctx.inspection.model_tree_sha256,
          physical_gpu_count: ctx.inspection.physical_gpu_count,
        }
      : null,
    checked: ctx.checked
      ? {
          vllm_api_version: ctx.checked.vllm_api_version,
          image_id: ctx.checked.image_id,
          nixl_compat_hash: ctx.checked.nixl_compat_hash ?? null,
        }
      : null,
    layout: ctx.layout,
    conditions: conditionsFor(prev?.conditions, phase, ctx, now, stepEvidence(prev?.phase, phase, ctx)),
    last_error: ctx.error,
    attempts: ctx.attempts,
    retry_at: ctx.retryAt,
    history,
    snapshot,
    updated_at: now,
  };
}

/**
 * The record's snapshot context, when it has one (empty when it has none). Evidence the snapshot names
 * in its run directory reads as null: the record's summaries (inspection, checked) speak for it.
 */
export function recordContext(record: EngineRecord | undefined): Partial<EngineContext> {
  const context = (record?.snapshot as { context?: Partial<EngineContext> } | null | undefined)?.context;
  return context ? withoutRunFiles(context) : {};
}
