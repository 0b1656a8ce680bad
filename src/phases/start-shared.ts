// start-shared (seed 001 "Native shared startup"): start two to eight checked
// plans on one GPU, one after another. Before anything runs: the shared budget
// (shared-budget.ts), every planned listener, and that each selected device
// resolves to shared_device.gpu_uuid inside the checked runtime with its
// recorded environment (runtime-devices.ts: CUDA's device order, not
// nvidia-smi's, numbers the ordinals). The
// first GPU reading is the baseline; before each launch the free headroom must
// hold the engine's share; after each engine passes readiness (start) and
// identity (probe, backend identity) the whole-device increase since the
// baseline must not exceed allowance × total memory (equality passes). Each
// ready engine's shared-start.json keeps the readings. Any failure cleans up
// everything this invocation started, in reverse launch order
// (shared-cleanup.ts). Reusable: the reconciler calls it with run directories.
import path from "node:path";
import type { EngineHandle } from "./types.js";
import { start, type StartOptions } from "./start.js";
import { probe } from "./probe.js";
import { loadCheckedRun, refuseExisting, refuseUsed, type CheckedRun } from "./checked-run.js";
import {
  allowanceMib,
  MAX_SHARED,
  MIN_SHARED,
  planUtilization,
  sharedBudget,
  type SharedBudget,
} from "./shared-budget.js";
import { gpuByUuid, readGpuMemory, type GpuMemory } from "./gpu-memory.js";
import {
  queryRuntimeDevices,
  resolveRuntimeDevice,
  selectedDeviceInput,
  type RuntimeResolution,
} from "./runtime-devices.js";
import { inspectScriptPath } from "./runtime-inspect.js";
import { blockedListeners, checkListeners, type ListenerCheck } from "./listeners.js";
import { compareDecimals, formatDecimal, integerDecimal, multiplyDecimals, parseDecimal } from "./decimal.js";
import { ActionError, refusal } from "./action-error.js";
import { writeFileExclusive } from "../state/atomic-file.js";
import { DEFAULT_TOOL_TIMEOUT_MS } from "./host/run-tool.js";
import type { HostAccess } from "../hosts/types.js";
import { cleanUpShared, SHARED_START_FILE, type Launched, type SharedStartRecord } from "./shared-cleanup.js";

export { SHARED_START_FILE, SHARED_START_SCHEMA, type SharedStartRecord } from "./shared-cleanup.js";
const ACTION = "start-shared";

/** Each engine starts as `start` starts one; readySeconds is the budget per engine (--ready-seconds). */
export interface StartSharedOptions extends StartOptions {
  /** Startup environment: NARWHAL_NODE_<n>_ATTESTATION_URL takes precedence over the prepared URL. */
  env?: Readonly<Record<string, string | undefined>>;
  /** The plans' node: the listeners and the GPU memory readings are taken there. */
  host: HostAccess;
  /** nvidia-smi for memory readings; default the plans' node.nvidia_smi. */
  nvidiaSmi?: string;
  /** inspect_runtime.py, which lists the devices the checked runtime sees; default the one beside the check script. */
  inspectScript?: string;
  toolTimeoutMs?: number;
  progress?: (message: string) => void;
}

export interface SharedStartResult {
  budget: SharedBudget;
  records: SharedStartRecord[];
  files: string[];
}

const mib = (g: GpuMemory, at: string) => ({ at, used_mib: g.used_mib, total_mib: g.total_mib });

/**
 * Resolve each plan's selected device inside its checked runtime; every one must be
 * shared_device.gpu_uuid. The query creates no CUDA context, so it moves no memory reading.
 */
async function resolveDevices(
  members: CheckedRun[],
  budget: SharedBudget,
  opts: StartSharedOptions,
): Promise<Map<string, RuntimeResolution>> {
  const selected = new Map<string, RuntimeResolution>();
  for (const m of members) {
    const { plan, run } = m;
    const runtime = await queryRuntimeDevices(ACTION, m, {
      backend: opts.backend,
      scriptPath: opts.inspectScript ?? inspectScriptPath(),
      signal: opts.signal,
    });
    const r = resolveRuntimeDevice(plan.gpu.ids[0]!, budget.gpu_uuid, runtime);
    if (!r.ok)
      throw refusal(ACTION, `on node ${plan.node.name}, ${plan.gpu.visibility_env}=${plan.gpu.ids[0]} ${r.problem}`, {
        engine: plan.engine,
        run: run.dir,
        input: selectedDeviceInput(plan, run.dir),
        fix: r.fix,
      });
    selected.set(plan.engine, r.resolution);
  }
  return selected;
}

export async function startShared(dirs: string[], opts: StartSharedOptions): Promise<SharedStartResult> {
  if (dirs.length < MIN_SHARED || dirs.length > MAX_SHARED) {
    throw refusal(ACTION, `start-shared takes ${MIN_SHARED} to ${MAX_SHARED} --run directories, got ${dirs.length}`, {
      input: "--run",
      fix: `Select two to eight checked plans that share one GPU.`,
    });
  }
  const members: CheckedRun[] = [];
  for (const dir of dirs) members.push(await loadCheckedRun(ACTION, dir));
  for (const m of members) {
    await refuseExisting(ACTION, m, [SHARED_START_FILE]);
    await refuseUsed(ACTION, m);
  }
  const { budget, problems } = sharedBudget(
    members.map((m) => ({ dir: m.run.dir, plan: m.plan })),
    opts.backend.kind,
  );
  if (!budget)
    throw refusal(ACTION, problems.join("; "), {
      input: "--run",
      fix: "Select checked plans of one group that share one GPU UUID and allowance, with unique roles and ports and gpu_memory_utilization summing to at most the allowance.",
    });

  const env = opts.env ?? {};
  const listeners = new Map<string, ListenerCheck[]>();
  const blocked: string[] = [];
  for (const m of members) {
    const checks = await checkListeners(opts.host, m.run.dir, m.plan, env);
    listeners.set(m.plan.engine, checks);
    blocked.push(...blockedListeners(checks).map((b) => `${m.plan.engine} ${b}`));
  }
  if (blocked.length)
    throw refusal(ACTION, `planned listeners are not free: ${blocked.join("; ")}`, {
      input: "ports",
      fix: "Any existing listener blocks launch until ownership is resolved: find it with ss -ltnp and stop it, or prepare plans with other ports.",
    });

  const devices = await resolveDevices(members, budget, opts);
  const nvidiaSmi = opts.nvidiaSmi ?? members[0]!.plan.node?.nvidia_smi ?? "nvidia-smi";
  const read = (signal = opts.signal) =>
    readGpuMemory(opts.host, nvidiaSmi, { signal, timeoutMs: opts.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS });
  const baselineReading = await read();
  const baselineGpu = gpuByUuid(baselineReading, budget.gpu_uuid);
  if (!baselineGpu)
    throw refusal(
      ACTION,
      `the runtime resolves every plan to ${budget.gpu_uuid}, which ${nvidiaSmi} on node ${members[0]!.plan.node.name} does not list`,
      {
        input: "node.nvidia_smi",
        fix: "Point node.nvidia_smi at the node's own nvidia-smi (the readings of the shared GPU come from it), or correct shared_device.gpu_uuid.",
      },
    );
  const baseline = mib(baselineGpu, baselineReading.at);
  const totalMib = baselineGpu.total_mib;
  const limit = allowanceMib(budget.device_allowance, totalMib);

  const launched: Launched[] = [];
  const files: string[] = [];
  try {
    for (const [i, m] of members.entries()) {
      const { run, plan } = m;
      const utilization = planUtilization(plan)!;
      const share = multiplyDecimals(parseDecimal(utilization)!, integerDecimal(totalMib));
      const beforeReading = await read();
      const before = mib(gpuByUuid(beforeReading, budget.gpu_uuid)!, beforeReading.at);
      const base: SharedStartRecord = {
        schema: "narwhal.shared-start/v1",
        status: "starting",
        engine: plan.engine,
        role: plan.role,
        run: run.dir,
        backend: plan.backend,
        plan_sha256: run.plan_sha256,
        group_signature: plan.group_signature,
        launch_order: i + 1,
        engines: members.map((x) => x.plan.engine),
        gpu: {
          uuid: baselineGpu.uuid,
          selected: plan.gpu.ids[0]!,
          index: baselineGpu.index,
          total_mib: totalMib,
          runtime: devices.get(plan.engine)!,
        },
        allowance: {
          device_allowance: budget.device_allowance,
          gpu_memory_utilization: utilization,
          utilization_sum: budget.sum,
          allowance_mib: formatDecimal(limit),
          engine_share_mib: formatDecimal(share),
        },
        readings: { baseline, before },
        listeners: listeners.get(plan.engine) ?? [],
      };
      const entry: Launched = { run, plan, handle: null, record: base, ready: false };
      launched.push(entry);
      const free = before.total_mib - before.used_mib;
      if (compareDecimals(integerDecimal(free), share) < 0) {
        throw new ActionError(
          ACTION,
          `only ${free} MiB of ${totalMib} MiB are free on ${budget.gpu_uuid} before ${plan.engine}, which needs ${utilization} × ${totalMib} = ${formatDecimal(share)} MiB`,
          {
            engine: plan.engine,
            run: run.dir,
            retryable: true,
            input: "GPU memory",
            fix: "Existing allocations consume the free headroom: find the processes using the GPU (nvidia-smi) or lower gpu_memory_utilization in fresh plans.",
          },
        );
      }
      opts.progress?.(`starting ${plan.engine} (${i + 1}/${members.length}) on ${budget.gpu_uuid}`);
      const began = Date.now();
      // start-shared cleans up itself, in reverse launch order, recording each removal's outcome.
      const handle: EngineHandle = await start(run, { ...opts, stopOnFailure: false });
      entry.handle = handle;
      const probed = await probe(run, { backend: opts.backend, handle, signal: opts.signal });
      const identity = await opts.backend.identityProblems(handle, plan);
      if (identity.length)
        throw new ActionError(
          ACTION,
          `the engine serving ${plan.endpoint} is not this plan's: ${identity.join("; ")}`,
          { engine: plan.engine, run: run.dir, retryable: false, input: "engine identity" },
        );
      const process = await opts.backend.describeProcess(handle);
      const afterReading = await read();
      const after = mib(gpuByUuid(afterReading, budget.gpu_uuid)!, afterReading.at);
      const aggregate = after.used_mib - baseline.used_mib;
      entry.record = {
        ...base,
        readings: { baseline, before, after },
        increase_mib: { engine: after.used_mib - before.used_mib, aggregate },
        readiness: {
          ready_at: probed.probed_at,
          seconds: Math.round((Date.now() - began) / 100) / 10,
          ready_seconds_allowed: opts.readySeconds,
        },
        identity: {
          handle,
          process,
          vllm_version: probed.version,
          process_start_time_seconds: probed.process_start_time_seconds,
          model_revision: plan.model.revision,
          served_model: plan.model.served_name,
          probe_files: probed.files,
        },
      };
      if (compareDecimals(integerDecimal(aggregate), limit) > 0) {
        throw new ActionError(
          ACTION,
          `GPU ${budget.gpu_uuid} memory use rose by ${aggregate} MiB since the baseline, above the allowance ${budget.device_allowance} × ${totalMib} MiB = ${formatDecimal(limit)} MiB`,
          {
            engine: plan.engine,
            run: run.dir,
            retryable: false,
            input: "shared_device.device_allowance / gpu_memory_utilization",
            fix: "Allocations added by other processes during startup also count: find them with nvidia-smi, or lower gpu_memory_utilization in fresh plans.",
          },
        );
      }
      entry.record = { ...entry.record, status: "ready" };
      entry.ready = true;
      const file = path.join(run.dir, SHARED_START_FILE);
      if (!(await writeFileExclusive(file, JSON.stringify(entry.record, null, 2) + "\n")))
        throw refusal(ACTION, `${SHARED_START_FILE} appeared in ${run.dir} during startup`, {
          engine: plan.engine,
          run: run.dir,
        });
      files.push(file);
      opts.progress?.(
        `${plan.engine} ready: +${entry.record.increase_mib!.engine} MiB, ${aggregate} of ${formatDecimal(limit)} MiB allowed`,
      );
    }
  } catch (err) {
    throw await cleanUpShared(launched, err, {
      backend: opts.backend,
      stopGraceMs: opts.stopGraceMs,
      read: () => read(AbortSignal.timeout(opts.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS)),
      gpuUuid: budget.gpu_uuid,
    });
  }
  return { budget, records: launched.map((l) => l.record), files };
}
