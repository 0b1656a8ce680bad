// Inspections through the checked runtime (seed 001 model-dimensions,
// handshake-policy, and cache-registration's block grouping): the backend runs
// inspect_runtime.py in the engine's own runtime exactly as it runs the
// runtime check (a process with the engine's environment, or a temporary
// container that is always removed), and the result is written once into the
// run directory.
import { MODEL_RULES } from "./model-meta.js";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { EngineBackend } from "../backends/types.js";
import { lastFlagValue, type LaunchPlan } from "./plan.js";
import { ActionError } from "./action-error.js";
import { FRESH_RUN_FIX, loadCheckedRun, refuseExisting, type CheckedRun } from "./checked-run.js";
import { writeFileExclusive } from "../state/atomic-file.js";
import { checkScriptPath } from "../app.js";

export const INSPECT_SCRIPT = "inspect_runtime.py";
/** inspect_runtime.py ships beside check_runtime.py. */
export const inspectScriptPath = (): string => path.join(path.dirname(checkScriptPath()), INSPECT_SCRIPT);
const RESULT_PREFIX = "NARWHAL_INSPECT_RESULT ";

export type InspectMode = "model-dimensions" | "handshake-policy" | "block-grouping" | "cuda-devices";

export interface RuntimeInspectOptions {
  backend: EngineBackend;
  /** Path of inspect_runtime.py (beside check_runtime.py). */
  scriptPath: string;
  signal: AbortSignal;
}

export interface RuntimeInspection {
  inspection_id: string;
  result: Record<string, unknown>;
}

/** What the script needs from the plan, in the runtime's own paths. */
export function inspectInput(plan: LaunchPlan, planSha: string, mode: InspectMode): Record<string, unknown> {
  return {
    mode,
    plan_sha256: planSha,
    model_dir: plan.check.model_dir,
    hf_config_path: plan.check.hf_config_path,
    trust_remote_code: plan.model.trust_remote_code,
    dtype: lastFlagValue(plan.command, "--dtype") ?? plan.launch_record.runtime.model_dtype,
    kv_cache_dtype: lastFlagValue(plan.command, "--kv-cache-dtype") ?? plan.launch_record.runtime.kv_cache_dtype,
    block_size: Number(lastFlagValue(plan.command, "--block-size") ?? plan.launch_record.runtime.block_size),
    tensor_parallel_size: plan.gpu.tensor_parallel_size,
    kv_transfer_config: plan.kv_transfer_config,
    environment: plan.environment,
    model_rules: MODEL_RULES,
    visibility_env: plan.gpu.visibility_env,
  };
}

/** Run one inspection mode in the checked runtime of `loaded`. */
export async function inspectRuntime(
  action: string,
  loaded: CheckedRun,
  mode: InspectMode,
  opts: RuntimeInspectOptions,
): Promise<RuntimeInspection> {
  const { run, plan } = loaded;
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-inspect-"));
  try {
    const input = path.join(tmp, "inspect-input.json");
    await fs.writeFile(input, JSON.stringify(inspectInput(plan, run.plan_sha256, mode), null, 2) + "\n", {
      mode: 0o644,
    });
    const out = await opts.backend.runCheck(run, plan, opts.scriptPath, input, opts.signal);
    const line = out.stdout
      .trimEnd()
      .split("\n")
      .reverse()
      .find((l) => l.startsWith(RESULT_PREFIX));
    const parsed = line
      ? (JSON.parse(line.slice(RESULT_PREFIX.length)) as {
          ok: boolean;
          result: Record<string, unknown> | null;
          failure: { check: string; message: string; fix: string } | null;
        })
      : null;
    if (!parsed || !parsed.ok || !parsed.result || out.exit_code !== 0) {
      const why = parsed?.failure
        ? `${parsed.failure.check}: ${parsed.failure.message}`
        : `no result (exit ${out.exit_code}): ${(out.stderr || out.stdout).trim().split("\n").slice(-5).join(" | ")}`;
      throw new ActionError(action, `the ${mode} inspection in the checked runtime failed: ${why}`, {
        engine: plan.engine,
        run: run.dir,
        retryable: out.exit_code === null,
        input: parsed?.failure?.check ?? plan.command[0],
        fix:
          parsed?.failure?.fix ??
          "Make sure the runtime's Python runs the inspection script; run `narwhal engine check` on this run.",
      });
    }
    return { inspection_id: out.inspection_id, result: parsed.result };
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
  }
}

/** The envelope every inspection file carries: which plan and which runtime it came from. */
export function inspectionEnvelope(
  schema: string,
  loaded: CheckedRun,
  inspection: RuntimeInspection,
): Record<string, unknown> {
  return {
    schema,
    engine: loaded.plan.engine,
    plan_sha256: loaded.run.plan_sha256,
    runtime_identity: loaded.plan.runtime_identity,
    vllm_api_version: loaded.checked.vllm_api_version,
    inspection_id: inspection.inspection_id,
    inspected_at: new Date().toISOString(),
  };
}

/** Write an output file of a run exactly once. */
export async function writeRunOutput(
  action: string,
  loaded: CheckedRun,
  file: string,
  content: unknown,
): Promise<string> {
  const target = path.join(loaded.run.dir, file);
  if (!(await writeFileExclusive(target, JSON.stringify(content, null, 2) + "\n"))) {
    throw new ActionError(action, `${file} already exists in ${loaded.run.dir}`, {
      engine: loaded.plan.engine,
      run: loaded.run.dir,
      input: file,
      fix: FRESH_RUN_FIX,
    });
  }
  return target;
}

export const MODEL_DIMENSIONS_FILE = "model-dimensions.json";
export const HANDSHAKE_POLICY_FILE = "handshake-policy.json";

/** model-dimensions: layers, KV heads, head size, dtype ... of the model as the checked runtime reads it. */
export async function modelDimensions(
  dir: string,
  opts: RuntimeInspectOptions,
): Promise<{ file: string; content: Record<string, unknown> }> {
  const action = "model-dimensions";
  const loaded = await loadCheckedRun(action, dir);
  await refuseExisting(action, loaded, [MODEL_DIMENSIONS_FILE]);
  const inspection = await inspectRuntime(action, loaded, "model-dimensions", opts);
  const content = {
    ...inspectionEnvelope("narwhal.model-dimensions/v1", loaded, inspection),
    model: {
      path: loaded.plan.model.path,
      served_name: loaded.plan.model.served_name,
      revision: loaded.plan.model.revision,
    },
    ...inspection.result,
  };
  return { file: await writeRunOutput(action, loaded, MODEL_DIMENSIONS_FILE, content), content };
}
