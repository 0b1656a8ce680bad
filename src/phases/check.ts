// check: run the runtime check script in the engine's own runtime and bind its
// findings to the plan (checked.json). Each attempt is appended to the
// backend's check log; a repeated successful check keeps the original
// checked.json; a failure writes no checked.json.
import { MODEL_RULES } from "./model-meta.js";
import fs from "node:fs/promises";
import path from "node:path";
import type { CheckResult, PreparedRun } from "./types.js";
import type { EngineBackend, RuntimeCheckOutput } from "../backends/types.js";
import { LAUNCH_FILE, readPlan } from "./prepare.js";
import { PhaseError } from "../errors.js";
import { readJsonIfExists, writeFileExclusive } from "../state/atomic-file.js";
import type { LaunchPlan } from "./plan.js";
import { NIXL_COMPAT_FILE, nixlCompatRecord } from "./nixl-compat.js";
import { CHANGED_PLAN_FIX, CHECKED_FILE, planBindingProblem, STATE_BINDING } from "./plan-binding.js";
import { launcherChanges, type LauncherIdentity } from "../launcher.js";
import type { ProgressSink, StepWait } from "./progress.js";

export { CHECKED_FILE } from "./plan-binding.js";
export const RESULT_PREFIX = "NARWHAL_CHECK_RESULT ";

export function checkLogName(backend: LaunchPlan["backend"]): string {
  return backend === "container" ? "image-check.log" : "runtime-check.log";
}

interface ScriptFailure {
  check: string;
  message: string;
  fix: string;
  /** The input at fault, when the script can name it more precisely than its check (e.g. runtime.extra_args). */
  input?: string;
}

interface ScriptResult {
  ok: boolean;
  vllm_api_version: string | null;
  packages: Record<string, string>;
  connector: Record<string, unknown>;
  tokenizer: Record<string, unknown>;
  /** The config.json fields vLLM derives the NIXL compatibility dimensions from. */
  model_architecture?: Record<string, unknown>;
  requires_trust_remote_code: boolean;
  ssm: { required: boolean; layout: string | null };
  failures: ScriptFailure[];
}

export function parseScriptResult(stdout: string): ScriptResult | null {
  const line = stdout
    .trimEnd()
    .split("\n")
    .reverse()
    .find((l) => l.startsWith(RESULT_PREFIX));
  if (!line) return null;
  try {
    return JSON.parse(line.slice(RESULT_PREFIX.length)) as ScriptResult;
  } catch {
    return null;
  }
}

/** The plan's check inputs, in the runtime's own paths. */
export function checkInput(plan: LaunchPlan, planSha: string): Record<string, unknown> {
  return {
    plan_sha256: planSha,
    expected_packages: plan.check.expected_packages,
    model_dir: plan.check.model_dir,
    tokenizer: plan.check.tokenizer,
    hf_config_path: plan.check.hf_config_path,
    trust_remote_code: plan.model.trust_remote_code,
    kv_connector: plan.kv_transfer_config.kv_connector,
    kv_transfer_config: plan.kv_transfer_config,
    environment: plan.environment,
    // The complete argv the engine will run: the script parses it with the runtime's own vLLM parser.
    serve_command: plan.command,
    // The operator's part of it, so a rejection can be traced to runtime.extra_args or to the launcher.
    extra_args: plan.launch_record.runtime.extra_args,
    // The one list of convolutional-SSM model types and config keys prepare used too.
    model_rules: MODEL_RULES,
  };
}

function logEntry(out: RuntimeCheckOutput, planSha: string): string {
  return [
    `=== inspection ${out.inspection_id} plan_sha256=${planSha} at=${new Date().toISOString()} exit=${out.exit_code}`,
    // A check cut off by a deadline keeps its partial output, marked as such.
    out.deadline ? `--- deadline: ${out.deadline.message}; partial output follows` : "",
    out.stdout.trimEnd(),
    out.stderr.trimEnd() ? `--- stderr\n${out.stderr.trimEnd()}` : "",
    "",
  ]
    .filter((l, i, a) => l !== "" || i === a.length - 1)
    .join("\n");
}

export interface CheckOptions {
  backend: EngineBackend;
  scriptPath: string;
  signal: AbortSignal;
  /** Re-run the inspection even when checked.json already binds this plan (manual `engine check`). */
  force?: boolean;
  /** The running narwhal's launcher: a plan another launcher made is refused (seed 000). */
  launcher: LauncherIdentity;
  /** Told that the check runs, within the backend's deadline, for the operator's view. */
  waits?: ProgressSink;
}

/** "the check container to exit" (its image's own vLLM), or the native runtime's check script, within `limitMs`. */
export function checkWait(backend: LaunchPlan["backend"], limitMs: number): StepWait {
  const what = backend === "container" ? "the check container" : "the runtime check script";
  return { awaiting: `${what} to exit`, limitMs };
}

/**
 * seed 000: "A changed launcher requires a new prepared run". A plan whose recorded launcher
 * digest is not this narwhal's was made by other scripts or another plan format: checking it
 * would vouch for code this launcher does not ship. Terminal: only a new prepared run helps.
 */
export function launcherRefusal(engine: string, runDir: string, plan: LaunchPlan, running: LauncherIdentity) {
  const recorded = (plan as Partial<LaunchPlan>).launcher;
  if (recorded?.digest === running.digest) return null;
  const changes = launcherChanges(recorded, running).join("; ");
  return new PhaseError(
    engine,
    "check",
    `${path.join(runDir, LAUNCH_FILE)} was prepared by launcher ${recorded?.digest ?? "(none recorded)"}, but this narwhal's launcher is ${running.digest} (${changes})`,
    {
      retryable: false,
      input: `${path.join(runDir, LAUNCH_FILE)} launcher.digest`,
      fix: `A changed launcher requires a new prepared run: prepare a new run (narwhal engine prepare, or let the reconciler re-prepare; its input hash includes the launcher digest). ${runDir} is left as it is.`,
    },
  );
}

export async function check(run: PreparedRun, opts: CheckOptions): Promise<CheckResult> {
  const { plan, sha256: planSha } = await readPlan(run.dir);
  const checkedPath = path.join(run.dir, CHECKED_FILE);
  const existing = await readJsonIfExists<CheckResult>(checkedPath);
  // The state's hash (recorded at prepare) too: an edit made before the first check must not get checked into a binding.
  const bindings = [
    ...(existing ? [{ what: checkedPath, sha256: existing.plan_sha256 }] : []),
    { what: STATE_BINDING, sha256: run.plan_sha256 },
  ];
  const changed = planBindingProblem(path.join(run.dir, LAUNCH_FILE), planSha, bindings);
  if (changed)
    throw new PhaseError(run.engine, "check", changed, {
      retryable: false,
      input: path.join(run.dir, LAUNCH_FILE),
      fix: CHANGED_PLAN_FIX,
    });
  const otherLauncher = launcherRefusal(run.engine, run.dir, plan, opts.launcher);
  if (otherLauncher) throw otherLauncher;
  if (existing && !opts.force) return existing;

  // The input file is evidence too: one per plan, identical on every attempt.
  const inputPath = path.join(run.dir, "check-input.json");
  await writeFileExclusive(inputPath, JSON.stringify(checkInput(plan, planSha), null, 2) + "\n", 0o600);
  opts.waits?.(checkWait(plan.backend, opts.backend.checkDeadlineMs));
  const out = await opts.backend.runCheck(run, plan, opts.scriptPath, inputPath, opts.signal);
  await fs.appendFile(path.join(run.dir, checkLogName(plan.backend)), logEntry(out, planSha), { mode: 0o600 });
  if (out.deadline) {
    // Partial output is never a verdict, even if it happens to hold a result line.
    throw new PhaseError(run.engine, "check", `the runtime check was cut off: ${out.deadline.message}`, {
      retryable: true,
      input: out.deadline.input,
      fix: `Read the partial output in ${checkLogName(plan.backend)} in ${run.dir}; raise ${out.deadline.input} if the check needs longer, or check the Docker daemon. narwhal retries with backoff.`,
    });
  }

  const result = parseScriptResult(out.stdout);
  if (!result) {
    const tail = (out.stderr || out.stdout).trim().split("\n").slice(-5).join(" | ");
    throw new PhaseError(run.engine, "check", `the runtime check produced no result (exit ${out.exit_code}): ${tail}`, {
      // No exit code (a deadline) or one past 128 (killed by a signal: a daemon shutting down
      // stops its containers) says nothing about the plan: retried. Any other exit is the runtime's.
      retryable: out.exit_code === null || out.exit_code >= 128,
      input: plan.command[0],
      fix: `Read ${checkLogName(plan.backend)} in ${run.dir}; make sure the runtime's Python can run the check script.`,
    });
  }
  if (!result.ok || out.exit_code !== 0) {
    const failures = result.failures.length
      ? result.failures
      : [{ check: "runtime", message: `exit ${out.exit_code}`, fix: "Read the check log." }];
    throw new PhaseError(run.engine, "check", failures.map((f) => `${f.check}: ${f.message}`).join("; "), {
      retryable: false,
      input: [...new Set(failures.map((f) => f.input ?? f.check))].join(","),
      fix: [...new Set(failures.map((f) => f.fix))].join(" "),
    });
  }
  // The NIXL compatibility inputs before checked.json: a crash between the two re-runs the check,
  // which keeps this first record; checked.json first would end the check with no record ever written.
  const compat = nixlCompatRecord(plan, planSha, {
    vllm_version: result.vllm_api_version,
    connector_version: typeof result.connector.version === "number" ? result.connector.version : null,
    model_architecture: result.model_architecture ?? null,
  });
  await writeFileExclusive(path.join(run.dir, NIXL_COMPAT_FILE), JSON.stringify(compat, null, 2) + "\n");
  const checked: CheckResult = {
    plan_sha256: planSha,
    vllm_api_version: result.vllm_api_version ?? "",
    image_id: plan.runtime_identity,
    inspection_id: out.inspection_id,
    checked_at: new Date().toISOString(),
    packages: result.packages,
    connector: result.connector,
    tokenizer: result.tokenizer,
    trust_remote_code: plan.model.trust_remote_code,
    ssm_conv_state_layout: result.ssm.layout,
    nixl_compat_hash: compat.hash,
  };
  // Repeated success keeps the first checked.json (the log still records this attempt).
  const wrote = await writeFileExclusive(checkedPath, JSON.stringify(checked, null, 2) + "\n");
  return wrote ? checked : ((await readJsonIfExists<CheckResult>(checkedPath)) as CheckResult);
}
