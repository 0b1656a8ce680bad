// Starting an engine's container, idempotently: the run's launch token finds a
// container an earlier attempt (or a killed controller) created before anything
// new is made, a container bearing the token but not the plan is refused, and a
// dead run's container in the way is cleared with its log kept.
import path from "node:path";
import type Docker from "dockerode";
import type { EngineHandle, PreparedRun } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";
import { PhaseError } from "../errors.js";
import { exists, writeFileExclusive } from "../state/atomic-file.js";
import { copyContainerLog } from "./container-log.js";
import { DockerCallError, type DockerCalls } from "./docker-calls.js";
import { LABEL, containerName, engineLabels, inFleet } from "./container-labels.js";
import { containerPlanProblems, planEnv } from "./container-plan.js";
import { SECRET_PATH, entrypoint, installKey, provenKeyProblems, runKey } from "./container-key.js";
import { byToken, removeAttempt, type AttemptContext } from "./container-attempts.js";
import { verifyPlanImage } from "./container-image.js";
import { removeKeptFailures } from "./container-failed.js";

export const CONTAINER_ID_FILE = "container.id";

export async function ensureContainerStarted(
  ctx: AttemptContext,
  run: PreparedRun,
  plan: LaunchPlan,
  signal: AbortSignal,
): Promise<EngineHandle> {
  const { docker } = ctx;
  const handleOf = (id: string): EngineHandle => ({
    kind: "container",
    container_id: id,
    launch_token: run.launch_token,
    ...(plan.docker_host ? { docker_host: plan.docker_host } : {}),
  });
  const idFile = path.join(run.dir, CONTAINER_ID_FILE);

  // Every path that starts or keeps a container has its key in place, as recorded: a container a
  // killed controller created (before the key was copied in) gets it now, never starts without it.
  const key = await runKey(run, plan);
  const [mine] = await byToken(docker, ctx.stateDir, run.launch_token, signal);
  if (mine) {
    await refuseForeign(docker, run, plan, mine.id, signal);
    await writeFileExclusive(idFile, mine.id + "\n");
    if (mine.state === "running") {
      const problems = key === null ? [] : await provenKeyProblems(docker, mine.id, key, run.dir, signal);
      if (!problems.length) return handleOf(mine.id);
      await copyContainerLog(docker, mine.id, run.dir, ctx.logCapBytes);
      await docker.remove(mine.id, signal);
      throw new PhaseError(
        run.engine,
        "start",
        `container ${mine.id.slice(0, 12)} of ${run.dir} was running with ${problems.join("; ")}; removed it`,
        {
          retryable: true,
          input: SECRET_PATH,
          fix: "narwhal starts the engine from a fresh run on retry; find who changed the container's key file.",
        },
      );
    }
    if (mine.state === "created") {
      if (key !== null) await installKey(docker, mine.id, run, key, signal);
      await docker.start(mine.id, signal); // created by a controller that died before starting it
      return handleOf(mine.id);
    }
    throw new PhaseError(run.engine, "start", `container ${mine.id.slice(0, 12)} of ${run.dir} is ${mine.state}`, {
      retryable: true,
      fix: "A fresh start needs a fresh run directory; narwhal prepares one on retry. Read the container's log for the cause.",
    });
  }
  if (await exists(idFile)) {
    throw new PhaseError(run.engine, "start", `the container recorded in ${idFile} no longer exists`, {
      retryable: true,
      fix: "narwhal prepares a fresh run on retry.",
    });
  }
  await verifyPlanImage(docker, plan, "start", signal);
  await removeKeptFailures(ctx, run.engine, signal);
  await clearName(ctx, plan, signal);

  let id: string | undefined;
  try {
    ctx.failpoint("docker:create:before");
    id = await docker.create(
      {
        name: containerName(ctx.fleet?.name, run.engine),
        Image: plan.image!.id,
        Entrypoint: entrypoint(plan),
        Cmd: plan.command,
        Env: planEnv(plan),
        Labels: engineLabels(run, plan, ctx.stateDir, ctx.fleet?.name),
        HostConfig: {
          NetworkMode: "host",
          Binds: plan.mounts.map((m) => `${m.source}:${m.target}${m.read_only ? ":ro" : ""}`),
          Devices: plan.devices.map((d) => ({ PathOnHost: d, PathInContainer: d, CgroupPermissions: "rwm" })),
          RestartPolicy: { Name: "no" },
          Init: true,
        },
      },
      signal,
    );
    ctx.failpoint("docker:create:after");
    await writeFileExclusive(idFile, id + "\n");
    if (key !== null) await installKey(docker, id, run, key, signal);
    ctx.failpoint("docker:start:before");
    await docker.start(id, signal);
    ctx.failpoint("docker:start:after");
    return handleOf(id);
  } catch (err) {
    // Observe again before acting: remove whatever this attempt created (by its token), under fresh deadlines.
    await removeAttempt(docker, ctx.stateDir, run.launch_token, "engine", id);
    if (err instanceof DockerCallError)
      throw new PhaseError(run.engine, "start", err.message, {
        failure: err.failure,
        input: err.input,
        fix: "Check the Docker daemon on the engine host; narwhal retries with backoff.",
      });
    throw err;
  }
}

/** A container that bears this run's token but not its plan's command and environment is never started or adopted. */
async function refuseForeign(
  docker: DockerCalls,
  run: PreparedRun,
  plan: LaunchPlan,
  id: string,
  signal: AbortSignal,
): Promise<void> {
  const info = await docker.inspectContainer(id, signal);
  const problems = info ? await planProblems(docker, info, plan, signal) : [];
  if (!problems.length) return;
  throw new PhaseError(
    run.engine,
    "start",
    `container ${id.slice(0, 12)} carries the launch token of ${run.dir} but does not run its launch.json: ${problems.join("; ")}; it was not started or adopted`,
    {
      retryable: false,
      input: `container ${id.slice(0, 12)}`,
      fix: `Inspect and remove that container (docker inspect ${id.slice(0, 12)}; docker rm -f ${id.slice(0, 12)}); narwhal starts only the checked plan, from a fresh run on its next attempt.`,
    },
  );
}

/** How a container's command and environment differ from what the plan runs (none: it runs the plan). */
export async function planProblems(
  docker: DockerCalls,
  info: Docker.ContainerInspectInfo,
  plan: LaunchPlan,
  signal?: AbortSignal,
): Promise<string[]> {
  const image = await docker.inspectImage(plan.image!.id, signal);
  return containerPlanProblems(info.Config, { entrypoint: entrypoint(plan), imageEnv: image?.Config?.Env ?? [] }, plan);
}

/** The engine's container name (narwhal-[<fleet>-]<engine>) may still belong to this engine's previous, dead run: keep its log, then remove it. */
async function clearName(ctx: AttemptContext, plan: LaunchPlan, signal: AbortSignal): Promise<void> {
  const { docker } = ctx;
  const name = containerName(ctx.fleet?.name, plan.engine);
  const existing = await docker.inspectContainer(name, signal);
  if (!existing) return;
  const labels = existing.Config.Labels ?? {};
  if (labels[LABEL.state] !== ctx.stateDir || !inFleet(labels, ctx.fleet)) {
    const owner = labels[LABEL.state]
      ? `the narwhal controller of state directory ${labels[LABEL.state]}${labels[LABEL.fleet] ? ` (fleet ${labels[LABEL.fleet]})` : ""}`
      : "no narwhal controller";
    // Like a stranger on a planned port: not narwhal's to remove, so outwaited until it is gone.
    throw new PhaseError(
      plan.engine,
      "start",
      `a container named ${name} (${existing.Id.slice(0, 12)}) already exists and belongs to ${owner}`,
      {
        failure: "outwait",
        input: name,
        fix: 'Give each fleet sharing this Docker host its own "name" in fleet.json, or stop the other fleet\'s engine (narwhal down --state DIR) or remove/rename that container; narwhal never touches containers it does not own.',
      },
    );
  }
  if (existing.State.Running) {
    throw new PhaseError(
      plan.engine,
      "start",
      `${name} (${existing.Id.slice(0, 12)}) from another run is still running`,
      { retryable: true, fix: "narwhal stops the old engine during replacement; retrying." },
    );
  }
  // Evidence first: a log that cannot be copied now stays with the container, renamed out of the way.
  const log = await copyContainerLog(docker, existing.Id, labels[LABEL.run], ctx.logCapBytes);
  if (log.problem)
    await docker.rename(existing.Id, `${name}-${existing.Id.slice(0, 12)}`, signal).catch((err: unknown) => {
      // Removed meanwhile (the orphan sweep removes a dead run's container, its log copied first): the name is free.
      if (err instanceof DockerCallError && err.statusCode === 404) return;
      throw err;
    });
  else await docker.remove(existing.Id, signal);
}
