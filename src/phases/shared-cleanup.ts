// What a failed start-shared leaves behind, undone (seed 001): everything the
// invocation started is stopped and removed in reverse launch order — the
// current engine terminated, earlier ready native groups stopped by their
// recorded identity (stop-native, which writes native-stop.json), containers
// removed. Each engine's shared-start.json is then marked failed with the
// startup cause, its cleanup_status, any cleanup_error and the post-cleanup GPU
// reading; a removal that failed appears in the command error as well.
import path from "node:path";
import type { EngineBackend, ProcessDescription } from "../backends/types.js";
import type { EngineHandle, PreparedRun } from "./types.js";
import type { LaunchPlan } from "./plan.js";
import type { ListenerCheck } from "./listeners.js";
import type { GpuMemoryReading } from "./gpu-memory.js";
import type { RuntimeResolution } from "./runtime-devices.js";
import { gpuByUuid } from "./gpu-memory.js";
import { recordedHandle } from "./checked-run.js";
import { stopNative } from "./stop-native.js";
import { ActionError } from "./action-error.js";
import { NarwhalError } from "../errors.js";
import { writeFileAtomic } from "../state/atomic-file.js";

export const SHARED_START_FILE = "shared-start.json";
export const SHARED_START_SCHEMA = "narwhal.shared-start/v1";

interface Reading {
  at: string;
  used_mib: number;
  total_mib: number;
}

export type CleanupStatus = "removed" | "stopped" | "terminated" | "exited" | "nothing-started" | "failed";

export interface SharedStartRecord {
  schema: typeof SHARED_START_SCHEMA;
  status: "starting" | "ready" | "failed";
  engine: string;
  role: string;
  run: string;
  backend: LaunchPlan["backend"];
  plan_sha256: string;
  group_signature: string;
  /** 1-based position in the launch sequence, and every engine of the invocation in launch order. */
  launch_order: number;
  engines: string[];
  /** index is nvidia-smi's; runtime is how the checked runtime resolved `selected` (seed 001's evidence). */
  gpu: { uuid: string; selected: string; index: number; total_mib: number; runtime: RuntimeResolution };
  /** Decimal strings: the allowance, this engine's share, their sum, and allowance × total memory in MiB. */
  allowance: {
    device_allowance: string;
    gpu_memory_utilization: string;
    utilization_sum: string;
    allowance_mib: string;
    engine_share_mib: string;
  };
  readings: { baseline: Reading; before: Reading; after?: Reading };
  /** Whole-device increase over this engine's launch, and since the baseline. */
  increase_mib?: { engine: number; aggregate: number };
  readiness?: { ready_at: string; seconds: number; ready_seconds_allowed: number };
  identity?: {
    handle: EngineHandle;
    process: ProcessDescription;
    vllm_version: string;
    process_start_time_seconds: number;
    model_revision: string | null;
    served_model: string;
    probe_files: Record<string, string>;
  };
  listeners: ListenerCheck[];
  cause?: string;
  cleanup_status?: CleanupStatus;
  cleanup_error?: string;
  /** native-stop.json written for a previously ready native engine. */
  native_stop?: string;
  post_cleanup?: Reading | { error: string };
  /** The engine a failed start left behind (container id or process), when it never got as far as identity. */
  handle?: EngineHandle;
}

export interface Launched {
  run: PreparedRun;
  plan: LaunchPlan;
  handle: EngineHandle | null;
  record: SharedStartRecord;
  ready: boolean;
}

export interface CleanupOptions {
  backend: EngineBackend;
  stopGraceMs: number;
  /** A GPU reading that does not depend on the (possibly aborted) startup signal. */
  read: () => Promise<GpuMemoryReading>;
  gpuUuid: string;
}

const messageOf = (err: unknown) =>
  err instanceof NarwhalError ? err.describe() : err instanceof Error ? err.message : String(err);

async function undo(
  entry: Launched,
  opts: CleanupOptions,
): Promise<Pick<SharedStartRecord, "cleanup_status" | "cleanup_error" | "native_stop">> {
  // A start that failed never returned its handle; the run directory recorded it.
  const handle = (entry.handle ??= await recordedHandle(entry.run, entry.plan).catch(() => null));
  if (!handle) return { cleanup_status: "nothing-started" };
  try {
    if (handle.kind === "container") {
      await opts.backend.stop(handle, opts.stopGraceMs); // stops, keeps the log as engine.log, removes
      return { cleanup_status: "removed" };
    }
    if (!(await opts.backend.isAlive(handle))) return { cleanup_status: "exited" };
    if (entry.ready) {
      const stopped = await stopNative(entry.run, handle, { backend: opts.backend, graceMs: opts.stopGraceMs });
      return { cleanup_status: "stopped", native_stop: path.join(stopped.run, "native-stop.json") };
    }
    await opts.backend.stop(handle, opts.stopGraceMs);
    return { cleanup_status: "terminated" };
  } catch (err) {
    return { cleanup_status: "failed", cleanup_error: messageOf(err) };
  }
}

/** Undo a failed invocation and return the error to throw: the startup cause plus every cleanup outcome. */
export async function cleanUpShared(launched: Launched[], cause: unknown, opts: CleanupOptions): Promise<ActionError> {
  const failing = launched[launched.length - 1];
  const causeText = messageOf(cause);
  const outcomes = new Map<Launched, Awaited<ReturnType<typeof undo>>>();
  for (const entry of [...launched].reverse()) outcomes.set(entry, await undo(entry, opts));
  let post: SharedStartRecord["post_cleanup"];
  try {
    const reading = await opts.read();
    const gpu = gpuByUuid(reading, opts.gpuUuid);
    post = gpu
      ? { at: reading.at, used_mib: gpu.used_mib, total_mib: gpu.total_mib }
      : { error: `${opts.gpuUuid} is not listed` };
  } catch (err) {
    post = { error: messageOf(err) };
  }
  const cleanupErrors: string[] = [];
  for (const entry of launched) {
    const outcome = outcomes.get(entry)!;
    if (outcome.cleanup_error)
      cleanupErrors.push(
        `${entry.plan.engine} (${entry.handle?.kind === "container" ? `container ${entry.handle.container_id}` : `pid ${entry.handle?.pid}`}): ${outcome.cleanup_error}`,
      );
    const record: SharedStartRecord = {
      ...entry.record,
      ...(entry.handle && !entry.record.identity ? { handle: entry.handle } : {}),
      status: "failed",
      cause: entry === failing ? causeText : `shared startup failed at ${failing?.plan.engine}: ${causeText}`,
      ...outcome,
      post_cleanup: post,
    };
    // The one sanctioned rewrite of run evidence: the seed marks these records failed after cleanup.
    await writeFileAtomic(path.join(entry.run.dir, SHARED_START_FILE), JSON.stringify(record, null, 2) + "\n").catch(
      (err: unknown) =>
        cleanupErrors.push(`${entry.plan.engine}: cannot write ${SHARED_START_FILE}: ${messageOf(err)}`),
    );
  }
  const summary = [...outcomes]
    .reverse()
    .map(([e, o]) => `${e.plan.engine} ${o.cleanup_status}`)
    .join(", ");
  const original = cause instanceof NarwhalError ? cause : undefined;
  return new ActionError(
    "start-shared",
    `shared startup failed at ${failing?.plan.engine ?? "validation"}: ${causeText}. Cleanup in reverse launch order: ${summary || "nothing was started"}${cleanupErrors.length ? `. Cleanup errors: ${cleanupErrors.join("; ")}` : ""}`,
    {
      engine: failing?.plan.engine,
      run: failing?.run.dir,
      retryable: false,
      input: original?.input,
      fix: cleanupErrors.length
        ? "Inspect the recorded container ID or process before recovery and remove it by hand; container IDs and launch evidence remain in the run directories. Then prepare fresh runs."
        : "Trace the failure to a device, model, memory, library or transport input, then prepare and check fresh runs: a fresh start needs a fresh directory.",
      cause,
    },
  );
}
