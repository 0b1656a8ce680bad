// The container backend: an engine is a Docker container, created through the
// Docker Engine API (dockerode) with narwhal's labels. It is found again after
// a crash by its launch-token label before anything is created, so a crash
// between create and the state write never yields a second container.
// Here: one client per node's endpoint, and observing, stopping and listing what
// runs; starting is container-start.ts, the runtime check container-check.ts.
import { createRequire } from "node:module";
import type Docker from "dockerode";
import type { EngineSpec } from "../desired/types.js";
import type { EngineHandle, PreparedRun } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";
import type { DockerConfig } from "../config.js";
import { nodeFaultOf } from "../errors.js";
import type {
  EngineBackend,
  EngineLog,
  ListOwnedOptions,
  OwnedEngine,
  ProcessDescription,
  RuntimeCheckOutput,
} from "./types.js";
import { containerLogSaved, containerLogTail, copyContainerLog } from "./container-log.js";
import { DockerCalls } from "./docker-calls.js";
import { dockerOptions } from "./docker-endpoint.js";
import { dialStdio, streamAgent } from "./docker-ssh.js";
import { dockerReads, readsRoute } from "./docker-reads.js";
import { noFailpoints, type Failpoint } from "../failpoints.js";
import { NODES_LISTED_AT_ONCE, type NodeHosts } from "../hosts/node-hosts.js";
import { mapBounded } from "../hosts/slots.js";
import { LABEL, inFleet, type FleetScope } from "./container-labels.js";
import { imageByIdentity } from "./container-image.js";
import { isKeptFailure, keepFailedContainer } from "./container-failed.js";
import { observedKeyProblems, runKey } from "./container-key.js";
import type { AttemptContext } from "./container-attempts.js";
import { runContainerCheck } from "./container-check.js";
import { ensureContainerStarted, planProblems } from "./container-start.js";

// Where a started container's id is recorded in its run directory (read by phases/checked-run.ts).
export { CONTAINER_ID_FILE } from "./container-start.js";

// dockerode takes a fifth of a second of CPU to load from node_modules (a fiftieth as the bundle's copy): it is
// loaded by the first client(), so a command that meets no container engine (`status` of a native fleet) never
// pays for it.
const requireCjs = createRequire(import.meta.url);
// The bundle narwhal runs (scripts/bundle.mjs) defines this as its own copy of dockerode, built without the
// ssh2 and gRPC stacks narwhal never calls; dist/src and the tests load the package.
declare const NARWHAL_BUNDLED_DOCKERODE: string | undefined;
const DOCKERODE = typeof NARWHAL_BUNDLED_DOCKERODE === "string" ? NARWHAL_BUNDLED_DOCKERODE : "dockerode";

/**
 * Whether a container in this list state runs, as isAlive's inspect would say (State.Running); undefined
 * where the two may differ (paused and restarting containers count as running there): inspect it then.
 */
export function listedRunning(state: string): boolean | undefined {
  if (state === "running") return true;
  if (state === "exited" || state === "dead" || state === "created") return false;
  return undefined;
}

export interface ContainerBackendOptions {
  stateDir: string;
  docker: DockerConfig;
  stopGraceMs: number;
  /** NARWHAL_ENGINE_LOG_CAP_BYTES: most bytes of a container's log read into memory or kept as engine.log. */
  logCapBytes: number;
  /** The nodes and how each is reached (a node with an ssh block is this backend's Docker endpoint's host). */
  hosts: NodeHosts;
  failpoint?: Failpoint;
}

export class ContainerBackend implements EngineBackend {
  readonly kind = "container" as const;
  private readonly clients = new Map<string, DockerCalls>();

  private readonly failpoint: Failpoint;
  /** The fleet this backend acts for, learned with the desired engines (knowHosts); see container-labels.ts. */
  private fleet: FleetScope | undefined;
  constructor(private readonly opts: ContainerBackendOptions) {
    this.failpoint = opts.failpoint ?? noFailpoints;
  }

  /**
   * The bounded-call client for a node's endpoint (undefined = DOCKER_HOST or the local socket). A
   * ssh:// endpoint is dialled over the ssh access NodeHosts maps it to (the node whose endpoint it is).
   */
  client(host?: string): DockerCalls {
    const key = host ?? this.opts.docker.host ?? "";
    let c = this.clients.get(key);
    if (!c) {
      const hosts = this.opts.hosts;
      const dial = (endpoint: string) => dialStdio(endpoint, () => hosts.sshForDockerHost(endpoint));
      const options = dockerOptions(key || undefined, this.opts.docker, (endpoint) => streamAgent(dial(endpoint)));
      const { timeouts } = this.opts.docker;
      c = new DockerCalls(
        () => new (requireCjs(DOCKERODE) as typeof Docker)(options),
        timeouts,
        key || "the local Docker socket",
        dockerReads(
          readsRoute(options, key.startsWith("ssh:") ? dial(key) : null),
          Math.max(timeouts.list, timeouts.inspect),
        ),
      );
      this.clients.set(key, c);
    }
    return c;
  }

  /** Make every node's endpoint known, so orphans are found on all of them. */
  knowHosts(specs: EngineSpec[]): void {
    this.opts.hosts.learn(specs);
    if (specs[0]) this.fleet = { name: specs[0].fleet };
    for (const s of specs) if (s.backend === "container") this.client(s.node.docker_host);
  }

  async runtimeIdentity(spec: EngineSpec, signal: AbortSignal): Promise<string> {
    const docker = this.client(spec.node.docker_host);
    const c = { engine: spec.name, step: "inspect" as const, node: spec.node.name, ref: spec.launch.image ?? "" };
    return (await imageByIdentity(docker, c, signal)).Id;
  }

  get checkDeadlineMs(): number {
    return this.opts.docker.timeouts.check;
  }

  async runCheck(
    run: PreparedRun,
    plan: LaunchPlan,
    scriptPath: string,
    inputPath: string,
    signal: AbortSignal,
  ): Promise<RuntimeCheckOutput> {
    return runContainerCheck(this.attempt(plan.docker_host), run, plan, scriptPath, inputPath, signal);
  }

  async ensureStarted(run: PreparedRun, plan: LaunchPlan, signal: AbortSignal): Promise<EngineHandle> {
    return ensureContainerStarted(this.attempt(plan.docker_host), run, plan, signal);
  }

  private attempt(host?: string): AttemptContext {
    return {
      docker: this.client(host),
      stateDir: this.opts.stateDir,
      fleet: this.fleet,
      logCapBytes: this.opts.logCapBytes,
      failpoint: this.failpoint,
    };
  }

  async isAlive(handle: EngineHandle): Promise<boolean> {
    if (handle.kind !== "container") return false;
    const info = await this.client(handle.docker_host).inspectContainer(handle.container_id);
    return !!info && info.State.Running && (info.Config.Labels ?? {})[LABEL.token] === handle.launch_token;
  }

  async identityProblems(handle: EngineHandle, plan: LaunchPlan): Promise<string[]> {
    if (handle.kind !== "container") return [`handle is a ${handle.kind} engine, the plan is container`];
    const info = await this.client(handle.docker_host).inspectContainer(handle.container_id);
    if (!info) return [`container ${handle.container_id.slice(0, 12)} no longer exists`];
    const labels = info.Config.Labels ?? {};
    const problems: string[] = [];
    if (!info.State.Running) problems.push(`container ${handle.container_id.slice(0, 12)} is ${info.State.Status}`);
    if (info.Image !== plan.image?.id)
      problems.push(`container runs image ${info.Image}, the plan's is ${plan.image?.id}`);
    if (labels[LABEL.token] !== plan.launch_token)
      problems.push(`container's launch token label is ${labels[LABEL.token] ?? "missing"}, not this plan's`);
    if (labels[LABEL.inputHash] !== plan.input_hash)
      problems.push(
        `container's input-hash label ${labels[LABEL.inputHash] ?? "missing"} differs from the plan's ${plan.input_hash}`,
      );
    problems.push(
      ...(await planProblems(this.client(handle.docker_host), info, plan)).map(
        (p) => `container ${handle.container_id.slice(0, 12)}: ${p}`,
      ),
    );
    return problems;
  }

  async keyProblems(
    handle: EngineHandle,
    run: Pick<PreparedRun, "engine" | "dir">,
    plan: LaunchPlan,
  ): Promise<string[]> {
    if (handle.kind !== "container") return [];
    const key = await runKey(run, plan);
    return key === null ? [] : observedKeyProblems(this.client(handle.docker_host), handle.container_id, key, run.dir);
  }

  async processStartTime(handle: EngineHandle): Promise<number | null> {
    if (handle.kind !== "container") return null;
    const info = await this.client(handle.docker_host).inspectContainer(handle.container_id);
    return info?.State.Running ? Date.parse(info.State.StartedAt) / 1000 : null;
  }

  async describeProcess(handle: EngineHandle): Promise<ProcessDescription> {
    if (handle.kind !== "container") return { pid: null, args: [] };
    const info = await this.client(handle.docker_host).inspectContainer(handle.container_id);
    if (!info) return { pid: null, args: [], container_id: handle.container_id };
    return {
      pid: info.State.Running && info.State.Pid > 0 ? info.State.Pid : null,
      args: info.Config.Cmd ?? [],
      container_id: info.Id,
      image_id: info.Image,
    };
  }

  async stop(handle: EngineHandle, graceMs: number): Promise<void> {
    if (handle.kind !== "container") return;
    const docker = this.client(handle.docker_host);
    const info = await docker.inspectContainer(handle.container_id);
    if (!info) return;
    this.failpoint("docker:stop:before");
    await docker.stop(handle.container_id, Math.ceil(graceMs / 1000));
    this.failpoint("docker:stop:after");
    const labels = info.Config.Labels ?? {};
    // An engine's log is evidence of its run; a leftover check container's output already is (image-check.log).
    // A container whose log could not be copied is kept, stopped: the next sweep finds it and tries again.
    if (labels[LABEL.purpose] === "engine" && !(await containerLogSaved(labels[LABEL.run]))) {
      if ((await copyContainerLog(docker, handle.container_id, labels[LABEL.run], this.opts.logCapBytes)).problem)
        return;
    }
    this.failpoint("docker:remove:before");
    await docker.remove(handle.container_id);
    this.failpoint("docker:remove:after");
  }

  async keepFailedStart(run: PreparedRun, handle: EngineHandle, graceMs: number): Promise<string | null> {
    if (handle.kind !== "container") return null;
    return keepFailedContainer(this.attempt(handle.docker_host), run, handle, graceMs);
  }

  async startupLog(run: PreparedRun, handle: EngineHandle, opts: { tailBytes?: number } = {}): Promise<EngineLog> {
    if (handle.kind !== "container")
      return { text: "", where: "no container", problem: `handle is a ${handle.kind} engine` };
    const docker = this.client(handle.docker_host);
    const info = await docker.inspectContainer(handle.container_id).catch(() => undefined);
    // A dead engine's log is final: copy it now (once), so the error that quotes it points at a file that exists.
    const copyTo = info && !info.State.Running ? run.dir : undefined;
    // A tail is read from the daemon, except the first time a dead engine's log is read: that copy is evidence.
    const firstCopy = copyTo !== undefined && !(await containerLogSaved(copyTo));
    if (opts.tailBytes !== undefined && !firstCopy)
      return containerLogTail(docker, handle.container_id, opts.tailBytes);
    return copyContainerLog(docker, handle.container_id, copyTo, this.opts.logCapBytes);
  }

  async listOwned(opts: ListOwnedOptions = {}): Promise<OwnedEngine[]> {
    const owned: OwnedEngine[] = [];
    // An explicitly configured endpoint is always searched, also by a command that loads no desired
    // state (down): a container kept for its log after its record dropped it is found there.
    if (this.opts.docker.host) this.client();
    // Every endpoint at once (a ssh:// one's first call waits for its node's master), then in their order.
    const endpoints = [...this.clients];
    const lists = await mapBounded(endpoints, NODES_LISTED_AT_ONCE, ([, docker]) =>
      docker.list([`${LABEL.state}=${this.opts.stateDir}`]).then(
        (listed) => ({ listed }),
        (error: unknown) => ({ error }),
      ),
    );
    for (const [i, [host]] of endpoints.entries()) {
      const got = lists[i]!;
      if ("error" in got) {
        // One node that cannot be reached hides only its own containers, when the caller can say so.
        const fault = nodeFaultOf(got.error);
        if (!fault || !opts.unlisted) throw got.error;
        opts.unlisted(fault);
        continue;
      }
      for (const c of got.listed) {
        // A failed start's container, kept as evidence: not an engine that runs, nor an orphan to sweep.
        if (!opts.keptFailures && isKeptFailure(c)) continue;
        // Another fleet's, whose controller has a state directory of the same path (on another machine).
        if (!inFleet(c.labels, this.fleet)) continue;
        const purpose = c.labels[LABEL.purpose];
        // A check container left by a killed controller: at startup every one is (no check runs yet), later only past its deadline.
        const staleCheck =
          purpose === "check" &&
          (opts.startup || Date.now() / 1000 - c.created > this.opts.docker.timeouts.check / 1000);
        if (purpose !== "engine" && !staleCheck) continue;
        const running = listedRunning(c.state);
        owned.push({
          ...(c.labels[LABEL.run] ? { run_dir: c.labels[LABEL.run] } : {}),
          ...(running === undefined ? {} : { running }),
          engine: c.labels[LABEL.engine] ?? "?",
          launch_token: purpose === "engine" ? (c.labels[LABEL.token] ?? "") : `check:${c.id}`,
          handle: {
            kind: "container",
            container_id: c.id,
            launch_token: c.labels[LABEL.token] ?? "",
            ...(host ? { docker_host: host } : {}),
          },
        });
      }
    }
    return owned;
  }
}
