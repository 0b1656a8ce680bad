// The container backend: an engine is a Docker container, created through the
// Docker Engine API (dockerode) with narwhal's labels. It is found again after
// a crash by its launch-token label before anything is created, so a crash
// between create and the state write never yields a second container.
import fs from "node:fs/promises";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import type Docker from "dockerode";
import type { EngineSpec } from "../desired/types.js";
import type { EngineHandle, PreparedRun } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";
import type { DockerConfig } from "../config.js";
import { PhaseError, type FailureClass } from "../errors.js";
import { exists, writeFileExclusive } from "../state/atomic-file.js";
import type { EngineBackend, EngineLog, OwnedEngine, ProcessDescription, RuntimeCheckOutput } from "./types.js";
import { LogTail } from "./engine-log.js";
import { containerLogSaved, copyContainerLog } from "./container-log.js";
import { DockerCalls, DockerCallError } from "./docker-calls.js";
import { dockerOptions } from "./docker-endpoint.js";
import { tarArchive } from "./tar.js";
import { noFailpoints, type Failpoint } from "../failpoints.js";
import { LABEL, engineLabels, checkLabels, parseImageRef } from "./container-labels.js";
import { containerPlanProblems, planEnv } from "./container-plan.js";
import { SECRET_PATH, entrypoint, installKey, keyFileProblems, runKey } from "./container-key.js";

export const CONTAINER_ID_FILE = "container.id";

// dockerode (with its ssh and protobuf stack) takes a third of a second to load: it is loaded by the first
// client(), so a command that meets no container engine (`status` of a native fleet) never pays for it.
const requireCjs = createRequire(import.meta.url);

export interface ContainerBackendOptions {
  stateDir: string;
  docker: DockerConfig;
  stopGraceMs: number;
  /** NARWHAL_ENGINE_LOG_CAP_BYTES: most bytes of a container's log read into memory or kept as engine.log. */
  logCapBytes: number;
  failpoint?: Failpoint;
}

export class ContainerBackend implements EngineBackend {
  readonly kind = "container" as const;
  private readonly clients = new Map<string, DockerCalls>();

  private readonly failpoint: Failpoint;
  constructor(private readonly opts: ContainerBackendOptions) {
    this.failpoint = opts.failpoint ?? noFailpoints;
  }

  /** The bounded-call client for a node's endpoint (undefined = DOCKER_HOST or the local socket). */
  client(host?: string): DockerCalls {
    const key = host ?? this.opts.docker.host ?? "";
    let c = this.clients.get(key);
    if (!c) {
      const DockerClient = requireCjs("dockerode") as typeof Docker;
      c = new DockerCalls(new DockerClient(dockerOptions(key || undefined, this.opts.docker)), this.opts.docker.timeouts, key || "the local Docker socket");
      this.clients.set(key, c);
    }
    return c;
  }

  /** Make every node's endpoint known, so orphans are found on all of them. */
  knowHosts(specs: EngineSpec[]): void {
    for (const s of specs) if (s.backend === "container") this.client(s.node.docker_host);
  }

  async runtimeIdentity(spec: EngineSpec, signal: AbortSignal): Promise<string> {
    const ref = spec.launch.image ?? "";
    const docker = this.client(spec.node.docker_host);
    const fail = (message: string, fix: string, failure: FailureClass = "terminal") =>
      new PhaseError(spec.name, "inspect", message, { failure, input: "engine-launch.json image", fix });
    const info = await docker.inspectImage(ref, signal);
    // An image not loaded yet is the host's to provide: outwaited, re-checked until it is there.
    if (!info) throw fail(`image ${ref} is not present on ${docker.endpoint}`, "Load or import the image on the engine host; narwhal never pulls, and starts the engine once it is there.", "outwait");
    const parsed = parseImageRef(ref);
    if (parsed.id && info.Id !== parsed.id) throw fail(`image ${ref} resolves to ${info.Id}`, "Set image to the immutable image id the host actually holds.");
    if (parsed.digest && !(info.RepoDigests ?? []).some((d) => d.endsWith(`@${parsed.digest}`))) {
      throw fail(`image ${ref}: the runtime's resolved digests ${JSON.stringify(info.RepoDigests ?? [])} do not include ${parsed.digest}`, "Compare the runtime's resolved digest with the configured digest; re-pull or correct the pin.");
    }
    return info.Id;
  }

  async runCheck(run: PreparedRun, plan: LaunchPlan, scriptPath: string, inputPath: string, signal: AbortSignal): Promise<RuntimeCheckOutput> {
    const docker = this.client(plan.docker_host);
    // Each inspection has its own token, so whatever it created is found again after any failure,
    // also a create whose answer never arrived (the daemon may still have made the container).
    const token = `check-${randomUUID()}`;
    const output = new LogTail(this.opts.logCapBytes);
    let id: string | undefined;
    try {
      id = await docker.create(
        {
          Image: plan.image!.id,
          Entrypoint: ["python3"],
          Cmd: ["/narwhal/check_runtime.py", "/narwhal/check-input.json"],
          Env: planEnv(plan),
          Labels: checkLabels(run, this.opts.stateDir, token),
          HostConfig: { NetworkMode: "none", Binds: plan.mounts.map((m) => `${m.source}:${m.target}${m.read_only ? ":ro" : ""}`) },
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
      this.failpoint("docker:check:running");
      const code = await docker.wait(id, signal);
      await docker.readLog(id, output, signal);
      return { inspection_id: id, exit_code: code, stdout: output.text(), stderr: "" };
    } catch (err) {
      if (!(err instanceof DockerCallError && err.timedOut)) throw err;
      // Past a deadline what the check printed so far is evidence (seed 000 "inspect retained partial
      // output"): read it under a fresh deadline unless the log read itself was what ran out.
      if (id && output.total === 0) await docker.readLog(id, output).catch(() => undefined);
      return { inspection_id: id ?? token, exit_code: null, stdout: output.text(), stderr: "", deadline: { message: err.message, input: err.input ?? "NARWHAL_DOCKER_CHECK_MS" } };
    } finally {
      await this.removeAttempt(docker, token, "check", id);
    }
  }

  private async byToken(docker: DockerCalls, token: string, signal?: AbortSignal, purpose: "engine" | "check" = "engine") {
    return docker.list([`${LABEL.token}=${token}`, `${LABEL.purpose}=${purpose}`, `${LABEL.state}=${this.opts.stateDir}`], signal);
  }

  /** Remove whatever one attempt created, found by its token, under fresh deadlines (the attempt's own may be spent). */
  private async removeAttempt(docker: DockerCalls, token: string, purpose: "engine" | "check", known?: string): Promise<void> {
    const found = await this.byToken(docker, token, undefined, purpose).catch(() => []);
    for (const id of new Set([...found.map((c) => c.id), ...(known ? [known] : [])])) await docker.remove(id).catch(() => undefined);
  }

  async ensureStarted(run: PreparedRun, plan: LaunchPlan, signal: AbortSignal): Promise<EngineHandle> {
    const docker = this.client(plan.docker_host);
    const handleOf = (id: string): EngineHandle => ({ kind: "container", container_id: id, launch_token: run.launch_token, ...(plan.docker_host ? { docker_host: plan.docker_host } : {}) });
    const idFile = path.join(run.dir, CONTAINER_ID_FILE);

    // Every path that starts or keeps a container has its key in place, as recorded: a container a
    // killed controller created (before the key was copied in) gets it now, never starts without it.
    const key = await runKey(run, plan);
    const [mine] = await this.byToken(docker, run.launch_token, signal);
    if (mine) {
      await this.refuseForeign(docker, run, plan, mine.id, signal);
      await writeFileExclusive(idFile, mine.id + "\n");
      if (mine.state === "running") {
        const problems = key === null ? [] : await keyFileProblems(docker, mine.id, key, signal);
        if (!problems.length) return handleOf(mine.id);
        await copyContainerLog(docker, mine.id, run.dir, this.opts.logCapBytes);
        await docker.remove(mine.id, signal);
        throw new PhaseError(run.engine, "start", `container ${mine.id.slice(0, 12)} of ${run.dir} was running with ${problems.join("; ")}; removed it`, {
          retryable: true,
          input: SECRET_PATH,
          fix: "narwhal starts the engine from a fresh run on retry; find who changed the container's key file.",
        });
      }
      if (mine.state === "created") {
        if (key !== null) await installKey(docker, mine.id, run.engine, key, signal);
        await docker.start(mine.id, signal); // created by a controller that died before starting it
        return handleOf(mine.id);
      }
      throw new PhaseError(run.engine, "start", `container ${mine.id.slice(0, 12)} of ${run.dir} is ${mine.state}`, {
        retryable: true,
        fix: "A fresh start needs a fresh run directory; narwhal prepares one on retry. Read the container's log for the cause.",
      });
    }
    if (await exists(idFile)) {
      throw new PhaseError(run.engine, "start", `the container recorded in ${idFile} no longer exists`, { retryable: true, fix: "narwhal prepares a fresh run on retry." });
    }
    await this.clearName(docker, plan, signal);

    let id: string | undefined;
    try {
      this.failpoint("docker:create:before");
      id = await docker.create(
        {
          name: `narwhal-${run.engine}`,
          Image: plan.image!.id,
          Entrypoint: entrypoint(plan),
          Cmd: plan.command,
          Env: planEnv(plan),
          Labels: engineLabels(run, plan, this.opts.stateDir),
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
      this.failpoint("docker:create:after");
      await writeFileExclusive(idFile, id + "\n");
      if (key !== null) await installKey(docker, id, run.engine, key, signal);
      this.failpoint("docker:start:before");
      await docker.start(id, signal);
      this.failpoint("docker:start:after");
      return handleOf(id);
    } catch (err) {
      // Observe again before acting: remove whatever this attempt created (by its token), under fresh deadlines.
      await this.removeAttempt(docker, run.launch_token, "engine", id);
      if (err instanceof DockerCallError) throw new PhaseError(run.engine, "start", err.message, { failure: err.failure, input: err.input, fix: "Check the Docker daemon on the engine host; narwhal retries with backoff." });
      throw err;
    }
  }

  /** A container that bears this run's token but not its plan's command and environment is never started or adopted. */
  private async refuseForeign(docker: DockerCalls, run: PreparedRun, plan: LaunchPlan, id: string, signal: AbortSignal): Promise<void> {
    const info = await docker.inspectContainer(id, signal);
    const problems = info ? await this.planProblems(docker, info, plan, signal) : [];
    if (!problems.length) return;
    throw new PhaseError(run.engine, "start", `container ${id.slice(0, 12)} carries the launch token of ${run.dir} but does not run its launch.json: ${problems.join("; ")}; it was not started or adopted`, {
      retryable: false,
      input: `container ${id.slice(0, 12)}`,
      fix: `Inspect and remove that container (docker inspect ${id.slice(0, 12)}; docker rm -f ${id.slice(0, 12)}); narwhal starts only the checked plan, from a fresh run on its next attempt.`,
    });
  }

  private async planProblems(docker: DockerCalls, info: Docker.ContainerInspectInfo, plan: LaunchPlan, signal?: AbortSignal): Promise<string[]> {
    const image = await docker.inspectImage(plan.image!.id, signal);
    return containerPlanProblems(info.Config, { entrypoint: entrypoint(plan), imageEnv: image?.Config?.Env ?? [] }, plan);
  }

  /** `narwhal-<engine>` may still belong to this engine's previous, dead run: keep its log, then remove it. */
  private async clearName(docker: DockerCalls, plan: LaunchPlan, signal: AbortSignal): Promise<void> {
    const name = `narwhal-${plan.engine}`;
    const existing = await docker.inspectContainer(name, signal);
    if (!existing) return;
    const labels = existing.Config.Labels ?? {};
    if (labels[LABEL.state] !== this.opts.stateDir) {
      const owner = labels[LABEL.state] ? `the narwhal controller of state directory ${labels[LABEL.state]}` : "no narwhal controller";
      // Like a stranger on a planned port: not narwhal's to remove, so outwaited until it is gone.
      throw new PhaseError(plan.engine, "start", `a container named ${name} (${existing.Id.slice(0, 12)}) already exists and belongs to ${owner}`, {
        failure: "outwait",
        input: name,
        fix: "Stop the other fleet's engine (narwhal down --state DIR) or remove/rename that container; narwhal never touches containers it does not own.",
      });
    }
    if (existing.State.Running) {
      throw new PhaseError(plan.engine, "start", `${name} (${existing.Id.slice(0, 12)}) from another run is still running`, { retryable: true, fix: "narwhal stops the old engine during replacement; retrying." });
    }
    // Evidence first: a log that cannot be copied now stays with the container, renamed out of the way.
    const log = await copyContainerLog(docker, existing.Id, labels[LABEL.run], this.opts.logCapBytes);
    if (log.problem) await docker.rename(existing.Id, `${name}-${existing.Id.slice(0, 12)}`, signal);
    else await docker.remove(existing.Id, signal);
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
    if (info.Image !== plan.image?.id) problems.push(`container runs image ${info.Image}, the plan's is ${plan.image?.id}`);
    if (labels[LABEL.token] !== plan.launch_token) problems.push(`container's launch token label is ${labels[LABEL.token] ?? "missing"}, not this plan's`);
    if (labels[LABEL.inputHash] !== plan.input_hash) problems.push(`container's input-hash label ${labels[LABEL.inputHash] ?? "missing"} differs from the plan's ${plan.input_hash}`);
    problems.push(...(await this.planProblems(this.client(handle.docker_host), info, plan)).map((p) => `container ${handle.container_id.slice(0, 12)}: ${p}`));
    return problems;
  }

  async keyProblems(handle: EngineHandle, run: Pick<PreparedRun, "engine" | "dir">, plan: LaunchPlan): Promise<string[]> {
    if (handle.kind !== "container") return [];
    const key = await runKey(run, plan);
    return key === null ? [] : keyFileProblems(this.client(handle.docker_host), handle.container_id, key);
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
    return { pid: info.State.Running && info.State.Pid > 0 ? info.State.Pid : null, args: info.Config.Cmd ?? [], container_id: info.Id, image_id: info.Image };
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
      if ((await copyContainerLog(docker, handle.container_id, labels[LABEL.run], this.opts.logCapBytes)).problem) return;
    }
    this.failpoint("docker:remove:before");
    await docker.remove(handle.container_id);
    this.failpoint("docker:remove:after");
  }

  async startupLog(run: PreparedRun, handle: EngineHandle): Promise<EngineLog> {
    if (handle.kind !== "container") return { text: "", where: "no container", problem: `handle is a ${handle.kind} engine` };
    const docker = this.client(handle.docker_host);
    const info = await docker.inspectContainer(handle.container_id).catch(() => undefined);
    // A dead engine's log is final: copy it now, so the error that quotes it points at a file that exists.
    return copyContainerLog(docker, handle.container_id, info && !info.State.Running ? run.dir : undefined, this.opts.logCapBytes);
  }

  async listOwned(opts: { startup?: boolean } = {}): Promise<OwnedEngine[]> {
    const owned: OwnedEngine[] = [];
    // An explicitly configured endpoint is always searched, also by a command that loads no desired
    // state (down): a container kept for its log after its record dropped it is found there.
    if (this.opts.docker.host) this.client();
    for (const [host, docker] of this.clients) {
      for (const c of await docker.list([`${LABEL.state}=${this.opts.stateDir}`])) {
        const purpose = c.labels[LABEL.purpose];
        // A check container left by a killed controller: at startup every one is (no check runs yet), later only past its deadline.
        const staleCheck = purpose === "check" && (opts.startup || Date.now() / 1000 - c.created > this.opts.docker.timeouts.check / 1000);
        if (purpose !== "engine" && !staleCheck) continue;
        owned.push({
          ...(c.labels[LABEL.run] ? { run_dir: c.labels[LABEL.run] } : {}),
          engine: c.labels[LABEL.engine] ?? "?",
          launch_token: purpose === "engine" ? (c.labels[LABEL.token] ?? "") : `check:${c.id}`,
          handle: { kind: "container", container_id: c.id, launch_token: c.labels[LABEL.token] ?? "", ...(host ? { docker_host: host } : {}) },
        });
      }
    }
    return owned;
  }
}
