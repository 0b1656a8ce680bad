// The no-controller check of `narwhal status`: with nobody observing, a record
// says "captured" long after its engine died. Each recorded process or container
// is checked once, cheaply, with the identity checks the backends use: a native
// engine by pid + start ticks + boot id, containers by one labelled list per
// Docker endpoint under a short deadline. Nothing is changed; the Docker client
// is loaded only when some record is a container engine.
import type { Config } from "../config.js";
import type { EngineHandle } from "../phases/types.js";
import type { Live } from "./status-view.js";
import { NativeBackend } from "../backends/native.js";
import { nodeHostsFor } from "../backends/for-config.js";
import { processExists, readProcStat } from "../backends/proc.js";
import { describeFailure } from "../errors.js";

/** A status command answers in seconds: an endpoint that does not list in this time is "unknown", not waited on. */
export const STATUS_DOCKER_DEADLINE_MS = 3_000;

export interface ProbeTarget {
  engine: string;
  handle: EngineHandle;
}

/** Docker container states that cannot serve again without a new start. */
const GONE_STATES = new Set(["created", "exited", "dead", "removing"]);

type NativeHandle = Extract<EngineHandle, { kind: "native" }>;
type ContainerHandle = Extract<EngineHandle, { kind: "container" }>;

async function nativeLive(backend: NativeBackend, h: NativeHandle): Promise<Live> {
  try {
    if (await backend.isAlive(h)) return { liveness: "alive", problem: null };
  } catch (err) {
    // Its node does not answer (or refuses narwhal): not for a status check to call it gone.
    return { liveness: "unknown", problem: describeFailure(err) };
  }
  // /proc mounted with hidepid shows nothing of other users' processes: an existing pid cannot be ruled out.
  // Only this host's /proc says so: an engine on another node is that node's.
  if (h.node === undefined && processExists(h.pid) && (await readProcStat(h.pid)) === null) {
    return { liveness: "unknown", problem: `pid ${h.pid} exists but /proc/${h.pid}/stat cannot be read (hidepid?)` };
  }
  return { liveness: "gone", problem: `pid ${h.pid} not running` };
}

function reason(err: unknown): string {
  const e = err as { name?: string; message?: string };
  return e?.name === "TimeoutError" ? `no answer within ${STATUS_DOCKER_DEADLINE_MS} ms` : (e?.message ?? String(err));
}

async function containerLive(config: Config, handles: ContainerHandle[]): Promise<Live[]> {
  // Loaded here, not at the top: dockerode and its transport stack cost a fast command a third of a second.
  const [{ ContainerBackend }, { LABEL }] = await Promise.all([
    import("../backends/container.js"),
    import("../backends/container-labels.js"),
  ]);
  const backend = new ContainerBackend({
    stateDir: config.stateDir,
    docker: config.docker,
    stopGraceMs: config.stopGraceMs,
    logCapBytes: config.engineLogCapBytes,
    hosts: nodeHostsFor(config),
  });
  const byHost = new Map<string, ContainerHandle[]>();
  for (const h of handles) byHost.set(h.docker_host ?? "", [...(byHost.get(h.docker_host ?? "") ?? []), h]);
  const found = new Map<ContainerHandle, Live>();
  await Promise.all(
    [...byHost].map(async ([host, group]) => {
      try {
        const docker = backend.client(host || undefined);
        // One list answers for every engine on the endpoint; no per-engine inspect.
        const listed = await docker.list(
          [`${LABEL.state}=${config.stateDir}`],
          AbortSignal.timeout(STATUS_DOCKER_DEADLINE_MS),
        );
        for (const h of group) {
          const c = listed.find((x) => x.id === h.container_id);
          const id = h.container_id.slice(0, 12);
          if (!c) found.set(h, { liveness: "gone", problem: `container ${id} no longer exists on ${docker.endpoint}` });
          else if (c.labels[LABEL.token] !== h.launch_token)
            found.set(h, { liveness: "gone", problem: `container ${id} carries another launch token` });
          else if (c.state === "running") found.set(h, { liveness: "alive", problem: null });
          // Paused or restarting is neither serving nor gone: not for a status check to decide.
          else
            found.set(h, {
              liveness: GONE_STATES.has(c.state) ? "gone" : "unknown",
              problem: `container ${id} is ${c.state}`,
            });
        }
      } catch (err) {
        const why = `docker container list on ${host || config.docker.host || "the local Docker socket"}: ${reason(err)}`;
        for (const h of group) found.set(h, { liveness: "unknown", problem: why });
      }
    }),
  );
  return handles.map((h) => found.get(h)!);
}

/** Check each target once; the answer per engine. */
export async function probeEngines(config: Config, targets: ProbeTarget[]): Promise<Record<string, Live>> {
  const result: Record<string, Live> = {};
  const native = new NativeBackend({
    stateDir: config.stateDir,
    hostEnv: config.hostEnv,
    logCapBytes: config.engineLogCapBytes,
    hosts: nodeHostsFor(config),
  });
  const natives = targets.flatMap((t) => (t.handle.kind === "native" ? [{ engine: t.engine, handle: t.handle }] : []));
  const containers = targets.flatMap((t) =>
    t.handle.kind === "container" ? [{ engine: t.engine, handle: t.handle }] : [],
  );
  const [nativeResults, containerResults] = await Promise.all([
    Promise.all(natives.map(async (t) => [t.engine, await nativeLive(native, t.handle)] as const)),
    containers.length
      ? containerLive(
          config,
          containers.map((t) => t.handle),
        )
      : Promise.resolve([]),
  ]);
  for (const [engine, live] of nativeResults) result[engine] = live;
  containers.forEach((t, i) => (result[t.engine] = containerResults[i]!));
  return result;
}
