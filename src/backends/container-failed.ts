// A failed start keeps its container (seed 000: "If startup fails: use the
// recorded container ID. Trace the failure ..."): stopped, its log copied, its
// `docker inspect` state saved as start-failure.json in the run directory, and
// renamed narwhal-[<fleet>-]<engine>-failed-<id12> so the engine's name is free for the
// next attempt. Docker cannot relabel a container, and io.narwhal.state already
// names the owning state directory: the name is what marks it. Nothing adopts or
// sweeps a kept container; the engine's next start removes it, as does `down`.
import path from "node:path";
import type { EngineHandle, PreparedRun } from "../phases/types.js";
import { writeFileExclusive } from "../state/atomic-file.js";
import { copyContainerLog, containerLogSaved } from "./container-log.js";
import type { ContainerSummary } from "./docker-calls.js";
import { LABEL, containerName, inFleet } from "./container-labels.js";
import type { AttemptContext } from "./container-attempts.js";

export const START_FAILURE_FILE = "start-failure.json";

const KEPT_NAME = /^\/?narwhal-.+-failed-[0-9a-f]{12}$/;

export const keptName = (fleet: string | undefined, engine: string, id: string) =>
  `${containerName(fleet, engine)}-failed-${id.slice(0, 12)}`;

/** A stopped container kept as a failed start's evidence. */
export const isKeptFailure = (c: Pick<ContainerSummary, "names" | "state">) =>
  c.state !== "running" && c.names.some((n) => KEPT_NAME.test(n));

/** Stop, keep and describe a failed start's container; null when it is gone or cannot be kept. */
export async function keepFailedContainer(
  ctx: AttemptContext,
  run: PreparedRun,
  handle: Extract<EngineHandle, { kind: "container" }>,
  graceMs: number,
): Promise<string | null> {
  const { docker } = ctx;
  const id = handle.container_id;
  await docker.stop(id, Math.ceil(graceMs / 1000));
  if (!(await containerLogSaved(run.dir))) await copyContainerLog(docker, id, run.dir, ctx.logCapBytes);
  const info = await docker.inspectContainer(id);
  if (!info) return null;
  const file = path.join(run.dir, START_FAILURE_FILE);
  const s = info.State;
  const evidence = {
    engine: run.engine,
    endpoint: docker.endpoint,
    Id: info.Id,
    Name: keptName(ctx.fleet?.name, run.engine, info.Id),
    Image: info.Image,
    State: {
      Status: s.Status,
      ExitCode: s.ExitCode,
      OOMKilled: s.OOMKilled,
      Error: s.Error,
      StartedAt: s.StartedAt,
      FinishedAt: s.FinishedAt,
    },
    launch_token: info.Config.Labels?.[LABEL.token] ?? null,
  };
  await writeFileExclusive(file, JSON.stringify(evidence, null, 2) + "\n");
  await docker.rename(id, evidence.Name);
  const short = info.Id.slice(0, 12);
  return `container ${short} is kept, stopped, as ${evidence.Name} on ${docker.endpoint} (docker inspect ${short}; exit code ${s.ExitCode}${s.OOMKilled ? ", OOM-killed" : ""}); its state is in ${file}`;
}

/** The engine's next attempt starts: the containers its failed starts kept go (they hold no name or port, but evidence is in their runs). */
export async function removeKeptFailures(ctx: AttemptContext, engine: string, signal?: AbortSignal): Promise<void> {
  const listed = await ctx.docker.list(
    [`${LABEL.engine}=${engine}`, `${LABEL.state}=${ctx.stateDir}`, `${LABEL.purpose}=engine`],
    signal,
  );
  for (const c of listed) if (isKeptFailure(c) && inFleet(c.labels, ctx.fleet)) await ctx.docker.remove(c.id, signal);
}
