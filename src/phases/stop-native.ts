// stop-native (seed 001): stop the process group a native run started, on the
// engine's node, but only after the recorded boot ID and process start tick
// (read on that node) prove the PID is still that process. The backend's stop signals the group, waits through the
// group leader's exit and escalates survivors to SIGKILL; native-stop.json
// records what was stopped.
import path from "node:path";
import type { EngineHandle, PreparedRun } from "./types.js";
import type { EngineBackend } from "../backends/types.js";
import { groupMembersOn, isSameProcessOn } from "../backends/native-host.js";
import { nativeHostFor } from "../backends/native-owned.js";
import { NodeHosts } from "../hosts/node-hosts.js";
import { writeFileExclusive } from "../state/atomic-file.js";
import { ActionError, refusal } from "./action-error.js";
import { FRESH_RUN_FIX } from "./checked-run.js";
import type { StepWait } from "./progress.js";

/**
 * What a stop waits for, within the grace period (then SIGKILL): the native process group to exit
 * ("process group 4242 on node gpu-1 to exit after SIGTERM"), or the container to stop.
 */
export function stopWait(handle: EngineHandle, graceMs: number): StepWait {
  if (handle.kind === "container")
    return { awaiting: `container ${handle.container_id.slice(0, 12)} to stop after SIGTERM`, limitMs: graceMs };
  const where = handle.node ? ` on node ${handle.node}` : "";
  return { awaiting: `process group ${handle.pgid}${where} to exit after SIGTERM`, limitMs: graceMs };
}

export const NATIVE_STOP_FILE = "native-stop.json";
export const NATIVE_STOP_SCHEMA = "narwhal.native-stop/v1";

export interface NativeStopRecord {
  schema: typeof NATIVE_STOP_SCHEMA;
  engine: string;
  run: string;
  pid: number;
  pgid: number;
  boot_id: string;
  start_ticks: number;
  launch_token: string;
  /** Members of the process group when the stop began (leader included). */
  group_before: number[];
  grace_ms: number;
  /** The group outlived the grace period, so survivors got SIGKILL. */
  escalated_to_sigkill: boolean;
  started_at: string;
  stopped_at: string;
}

export interface StopNativeOptions {
  backend: EngineBackend;
  graceMs: number;
  /** How to reach the handle's node (the backend's). Absent: this machine (a role shell runs on the engine's node). */
  hosts?: NodeHosts;
}

/** Stop the engine `handle` recorded for `run` and write native-stop.json. */
export async function stopNative(
  run: PreparedRun,
  handle: EngineHandle,
  opts: StopNativeOptions,
): Promise<NativeStopRecord> {
  const action = "stop-native";
  if (handle.kind !== "native")
    throw refusal(action, `${run.dir} records a ${handle.kind} engine; stop-native stops native process groups`, {
      engine: run.engine,
      run: run.dir,
    });
  const host = await nativeHostFor(
    opts.hosts ?? new NodeHosts({ stateDir: "", clientEnv: {}, roleShell: true }),
    handle,
  );
  const bootId = await host.bootId();
  if (handle.boot_id !== bootId) {
    throw refusal(
      action,
      `the recorded boot ID ${handle.boot_id} is not this boot's (${bootId}): process ${handle.pid} ended with the previous boot; nothing was signalled`,
      {
        engine: run.engine,
        run: run.dir,
        input: "native-process.json boot_id",
        fix: "Nothing runs from this run directory any more; prepare a fresh one to start again.",
      },
    );
  }
  if (!(await isSameProcessOn(host, handle.pid, handle.start_ticks))) {
    throw refusal(
      action,
      `process ${handle.pid} with start tick ${handle.start_ticks} is not running (it exited, or the PID now belongs to another process); nothing was signalled`,
      {
        engine: run.engine,
        run: run.dir,
        input: "native-process.json start_ticks",
        fix: "Read engine.log in the run directory for why it exited; a fresh start needs a fresh directory.",
      },
    );
  }
  const startedAt = new Date();
  const before = await groupMembersOn(host, handle.pgid);
  await opts.backend.stop(handle, opts.graceMs);
  const elapsed = Date.now() - startedAt.getTime();
  const survivors = await groupMembersOn(host, handle.pgid);
  if (survivors.length) {
    throw new ActionError(
      action,
      `process group ${handle.pgid} still has members ${survivors.join(", ")} after SIGKILL`,
      {
        engine: run.engine,
        run: run.dir,
        retryable: true,
        fix: "Inspect those processes (uninterruptible I/O?) and run stop-native again.",
      },
    );
  }
  const record: NativeStopRecord = {
    schema: NATIVE_STOP_SCHEMA,
    engine: run.engine,
    run: run.dir,
    pid: handle.pid,
    pgid: handle.pgid,
    boot_id: handle.boot_id,
    start_ticks: handle.start_ticks,
    launch_token: handle.launch_token,
    group_before: before,
    grace_ms: opts.graceMs,
    escalated_to_sigkill: elapsed >= opts.graceMs,
    started_at: startedAt.toISOString(),
    stopped_at: new Date().toISOString(),
  };
  if (!(await writeFileExclusive(path.join(run.dir, NATIVE_STOP_FILE), JSON.stringify(record, null, 2) + "\n"))) {
    throw refusal(action, `${NATIVE_STOP_FILE} already exists in ${run.dir}`, {
      engine: run.engine,
      run: run.dir,
      input: NATIVE_STOP_FILE,
      fix: FRESH_RUN_FIX,
    });
  }
  return record;
}
