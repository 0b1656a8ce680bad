// The runtime check in a container (seed 000 inspect): a throwaway container of
// the plan's image, without network, runs check_runtime.py on the plan's input
// and is removed afterwards whatever happened, found again by its own token.
import fs from "node:fs/promises";
import { randomUUID } from "node:crypto";
import type { PreparedRun } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";
import type { RuntimeCheckOutput } from "./types.js";
import { LogTail } from "./engine-log.js";
import { DockerCallError } from "./docker-calls.js";
import { tarArchive } from "./tar.js";
import { checkLabels } from "./container-labels.js";
import { planEnv } from "./container-plan.js";
import { removeAttempt, type AttemptContext } from "./container-attempts.js";
import { verifyPlanImage } from "./container-image.js";

export async function runContainerCheck(
  ctx: AttemptContext,
  run: PreparedRun,
  plan: LaunchPlan,
  scriptPath: string,
  inputPath: string,
  signal: AbortSignal,
): Promise<RuntimeCheckOutput> {
  const { docker } = ctx;
  // Each inspection has its own token, so whatever it created is found again after any failure,
  // also a create whose answer never arrived (the daemon may still have made the container).
  const token = `check-${randomUUID()}`;
  const output = new LogTail(ctx.logCapBytes);
  let id: string | undefined;
  try {
    await verifyPlanImage(docker, plan, "check", signal);
    id = await docker.create(
      {
        Image: plan.image!.id,
        Entrypoint: ["python3"],
        Cmd: ["/narwhal/check_runtime.py", "/narwhal/check-input.json"],
        Env: planEnv(plan),
        Labels: checkLabels(run, ctx.stateDir, token, ctx.fleet?.name),
        HostConfig: {
          NetworkMode: "none",
          Binds: plan.mounts.map((m) => `${m.source}:${m.target}${m.read_only ? ":ro" : ""}`),
        },
      },
      signal,
    );
    const files = tarArchive([
      { name: "narwhal/", mode: 0o755 },
      { name: "narwhal/check_runtime.py", data: await fs.readFile(scriptPath), mode: 0o644 },
      { name: "narwhal/check-input.json", data: await fs.readFile(inputPath), mode: 0o644 },
    ]);
    await docker.putArchive(id, files, "/", signal);
    await docker.start(id, signal);
    ctx.failpoint("docker:check:running");
    const code = await docker.wait(id, signal);
    await docker.readLog(id, output, signal);
    return { inspection_id: id, exit_code: code, stdout: output.text(), stderr: "" };
  } catch (err) {
    if (!(err instanceof DockerCallError && err.timedOut)) throw err;
    // Past a deadline what the check printed so far is evidence (seed 000 "inspect retained partial
    // output"): read it under a fresh deadline unless the log read itself was what ran out.
    if (id && output.total === 0) await docker.readLog(id, output).catch(() => undefined);
    return {
      inspection_id: id ?? token,
      exit_code: null,
      stdout: output.text(),
      stderr: "",
      deadline: { message: err.message, input: err.input ?? "NARWHAL_DOCKER_CHECK_MS" },
    };
  } finally {
    await removeAttempt(docker, ctx.stateDir, token, "check", id);
  }
}
