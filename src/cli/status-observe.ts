// The no-controller check of `narwhal status`: with nobody observing, a record
// says "captured" long after its engine died. Each recorded process or container
// is checked once, cheaply, with the identity checks the backends use: a native
// engine by pid + start ticks + boot id on its node (a remote node's record is
// learned from the desired state, best-effort; a node that does not answer is
// "unknown"), containers by one labelled list per Docker endpoint under a short
// deadline. Nothing is changed; the Docker client is loaded only when some
// record is a container engine.
import type { Config } from "../config.js";
import type { EngineHandle } from "../phases/types.js";
import type { Live } from "./status-view.js";
import { NativeBackend } from "../backends/native.js";
import { nodeHostsFor } from "../backends/for-config.js";
import { processExists, readBootId, readProcStat } from "../backends/proc.js";
import { validateDesired } from "../desired/load.js";
import type { NodeHosts } from "../hosts/node-hosts.js";
import { append } from "../controller/map-lists.js";

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

/** `alive`: the backend's answer for the handle (NativeBackend.aliveAll), given STATUS_DOCKER_DEADLINE_MS. */
async function nativeLive(alive: Promise<boolean | Error>, h: NativeHandle, localBoot: string): Promise<Live> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(), { name: "TimeoutError" })), STATUS_DOCKER_DEADLINE_MS);
  });
  try {
    const answer = await Promise.race([alive, deadline]);
    if (answer instanceof Error) throw answer;
    if (answer) return { liveness: "alive", problem: null };
  } catch (err) {
    return { liveness: "unknown", problem: `node ${h.node ?? "local"}: ${reason(err)}` };
  } finally {
    clearTimeout(timer);
  }
  // /proc mounted with hidepid shows nothing of other users' processes: an existing pid cannot be ruled out.
  if (h.boot_id === localBoot && processExists(h.pid) && (await readProcStat(h.pid)) === null) {
    return { liveness: "unknown", problem: `pid ${h.pid} exists but /proc/${h.pid}/stat cannot be read (hidepid?)` };
  }
  return { liveness: "gone", problem: `pid ${h.pid} not running` };
}

function reason(err: unknown): string {
  const e = err as { name?: string; message?: string };
  return e?.name === "TimeoutError" ? `no answer within ${STATUS_DOCKER_DEADLINE_MS} ms` : (e?.message ?? String(err));
}

async function containerLive(config: Config, handles: ContainerHandle[]): Promise<Live[]> {
  // Loaded here, not at the top: the container backend's modules are not a native fleet's (its list is
  // docker-reads.ts', which loads no dockerode).
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
  for (const h of handles) append(byHost, h.docker_host ?? "", h);
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
        const byId = new Map(listed.map((x) => [x.id, x]));
        for (const h of group) {
          const c = byId.get(h.container_id);
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

/**
 * Learn the nodes from the desired state when some native engine ran on another machine (its boot id is
 * not this one's): only then is its ssh block needed. Best-effort: without it that engine is "unknown".
 */
async function learnRemoteNodes(config: Config, hosts: NodeHosts, natives: NativeHandle[], localBoot: string) {
  if (!natives.some((h) => h.node !== undefined && h.boot_id !== localBoot)) return;
  const loaded = await validateDesired(config.desiredDir).catch(() => null);
  if (loaded?.state) hosts.learn(loaded.state.specs);
}

/** Check each target once; the answer per engine. */
export async function probeEngines(config: Config, targets: ProbeTarget[]): Promise<Record<string, Live>> {
  const result: Record<string, Live> = {};
  const hosts = nodeHostsFor(config);
  const native = new NativeBackend({
    stateDir: config.stateDir,
    hostEnv: config.hostEnv,
    logCapBytes: config.engineLogCapBytes,
    hosts,
  });
  const natives = targets.flatMap((t) => (t.handle.kind === "native" ? [{ engine: t.engine, handle: t.handle }] : []));
  const localBoot = await readBootId();
  try {
    await learnRemoteNodes(
      config,
      hosts,
      natives.map((t) => t.handle),
      localBoot,
    );
    return await probeAll(config, native, natives, targets, localBoot, result);
  } finally {
    await hosts.close();
  }
}

async function probeAll(
  config: Config,
  native: NativeBackend,
  natives: Array<{ engine: string; handle: NativeHandle }>,
  targets: ProbeTarget[],
  localBoot: string,
  result: Record<string, Live>,
): Promise<Record<string, Live>> {
  const containers = targets.flatMap((t) =>
    t.handle.kind === "container" ? [{ engine: t.engine, handle: t.handle }] : [],
  );
  // One answer per node reached over ssh (its process table), not a read per engine there.
  const alive = native.aliveAll(natives.map((t) => t.handle));
  const [nativeResults, containerResults] = await Promise.all([
    Promise.all(
      natives.map(
        async (t, i) =>
          [
            t.engine,
            await nativeLive(
              alive.then((a) => a[i]!),
              t.handle,
              localBoot,
            ),
          ] as const,
      ),
    ),
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
