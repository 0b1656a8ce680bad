// `narwhal engine native-capture` and `attestation-serve` (seed 001): apply the
// run's recorded engine environment to the model, cache, NIXL and handshake
// checks, write the process-bound attestation.json, and serve it in the
// foreground with the same stdlib sidecar the reconciler runs beside each engine.
import path from "node:path";
import { spawn } from "node:child_process";
import { capture, LAYOUT_FILE } from "../../phases/capture.js";
import { handshakePolicy } from "../../phases/handshake-policy.js";
import { HANDSHAKE_POLICY_FILE } from "../../phases/runtime-inspect.js";
import { attestationUrl } from "../../phases/listeners.js";
import { ATTESTATION_FILE, ensureAttestation, type Attestation } from "../../phases/attestation.js";
import { sidecarScript } from "../../phases/attestation-sidecar.js";
import { loadCheckedRun, loadRun, refuseExisting, requireHandle, startedFile } from "../../phases/checked-run.js";
import { refusal } from "../../phases/action-error.js";
import { exists, readJsonIfExists } from "../../state/atomic-file.js";
import { thisHost } from "./actions.js";
import { engineResult, type EngineResult } from "./result.js";
import type { ActionContext } from "./context.js";
import { STDLIB_PYTHON } from "../../hosts/stdlib-python.js";

export async function nativeCaptureAction(ctx: ActionContext, dir: string): Promise<EngineResult> {
  const action = "native-capture";
  const loaded = await loadCheckedRun(action, dir);
  await refuseExisting(action, loaded, [ATTESTATION_FILE]);
  const handle = await requireHandle(action, loaded);
  const { run, plan } = loaded;
  const backend = ctx.backends[plan.backend];
  const problems = await backend.identityProblems(handle, plan);
  if (problems.length)
    throw refusal(action, `${plan.engine} is not running as recorded in ${run.dir}: ${problems.join("; ")}`, {
      engine: plan.engine,
      run: run.dir,
      input: startedFile(plan),
      fix: "An attestation binds a running engine: start one from a fresh prepared and checked run, then native-capture it.",
    });
  // The cache and handshake checks run in the engine's recorded environment (its runtime, env file, GPUs).
  const wrote: string[] = [];
  if (!(await exists(path.join(run.dir, LAYOUT_FILE)))) {
    await capture(run, { backend, handle, groupSignature: plan.group_signature, signal: ctx.signal });
    wrote.push(LAYOUT_FILE);
  }
  if (!(await exists(path.join(run.dir, HANDSHAKE_POLICY_FILE)))) {
    await handshakePolicy(run.dir, { backend, scriptPath: ctx.inspectScript, signal: ctx.signal });
    wrote.push(HANDSHAKE_POLICY_FILE);
  }
  const url = attestationUrl(plan, ctx.env).url;
  const attestation = await ensureAttestation(run, { backend, handle, host: thisHost(ctx, plan.node.name), url });
  wrote.push(ATTESTATION_FILE);
  const p = attestation.process;
  return engineResult(action, run.dir, {
    engine: plan.engine,
    files: Object.fromEntries(wrote.map((f) => [f, path.join(run.dir, f)])),
    summary: [
      `attested ${p.kind === "native" ? `pid ${p.pid} (start tick ${p.start_ticks})` : `container ${p.container_id.slice(0, 12)}`} for plan ${attestation.plan_sha256.slice(0, 12)}, served at ${url}`,
    ],
    details: { attestation },
  });
}

/** Serve the run's attestation in the foreground until SIGTERM/SIGINT; the sidecar's own exit status is the action's. */
export async function attestationServeAction(ctx: ActionContext, dir: string): Promise<EngineResult> {
  const action = "attestation-serve";
  const { run, plan } = await loadRun(action, dir);
  const file = path.join(run.dir, ATTESTATION_FILE);
  const attestation = await readJsonIfExists<Attestation>(file);
  if (!attestation)
    throw refusal(action, `${run.dir} holds no ${ATTESTATION_FILE}`, {
      engine: plan.engine,
      run: run.dir,
      input: ATTESTATION_FILE,
      fix: `Write it first: narwhal engine native-capture --run ${run.dir}.`,
    });
  const [python, ...isolated] = STDLIB_PYTHON;
  const child = spawn(python, [...isolated, sidecarScript(), file], {
    cwd: run.dir,
    env: ctx.config.hostEnv,
    stdio: ["ignore", "inherit", "inherit"],
  });
  const stop = () => child.kill("SIGTERM");
  ctx.signal.addEventListener("abort", stop, { once: true });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (c) => resolve(c));
  }).finally(() => ctx.signal.removeEventListener("abort", stop));
  if (code !== 0)
    throw refusal(action, `the attestation sidecar for ${plan.engine} exited with ${code ?? "a signal"}`, {
      engine: plan.engine,
      run: run.dir,
      input: `attestation_url ${attestation.attestation_url}`,
      fix: "Read its message above: free the attestation port (ss -ltnp) or fix the URL, then serve again.",
    });
  return engineResult(action, run.dir, {
    engine: plan.engine,
    files: { [ATTESTATION_FILE]: file },
    summary: [`served ${attestation.attestation_url} until ${ctx.signal.aborted ? "stopped" : "its engine exited"}`],
    details: { attestation_url: attestation.attestation_url },
  });
}
