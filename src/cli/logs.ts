// `narwhal logs ENGINE [-f] [--run N|--previous] [--tail N]`: an engine's log,
// like `docker compose logs`. The log's bytes go to stdout as the engine wrote
// them; which run and where its log is go to stderr first, so a pipe gets the
// log alone. Nothing here takes the state lock or writes anything: it works
// while a controller runs.
import path from "node:path";
import type { Config } from "../config.js";
import { readState } from "../state/store.js";
import { validateDesired } from "../desired/load.js";
import { nodeHostsFor } from "../backends/for-config.js";
import { NativeBackend } from "../backends/native.js";
import { copyLog, pause } from "../backends/log-reader.js";
import type { NodeHosts } from "../hosts/node-hosts.js";
import { EXIT } from "./exit-codes.js";
import { chooseRun, logSource, type ChosenRun, type LogSource, type RunChoice } from "./logs-source.js";

/** How often a follow looks for appended bytes and asks whether the engine was replaced or stopped. */
const FOLLOW_POLL_MS = 250;
/** Phases in which nothing writes the run's log any more. */
const ENDED = new Set(["removed", "removing", "stopped"]);

export interface LogsOptions {
  follow: boolean;
  choice: RunChoice;
  tail?: number;
}

type Write = (chunk: Buffer) => Promise<void>;

/** Writes to stdout at the pace the reader takes them; a reader that went away aborts a follow. */
function stdoutWriter(abort: () => void, stream: NodeJS.WriteStream = process.stdout): Write {
  return (chunk) =>
    new Promise<void>((resolve) => {
      if (stream.destroyed || !stream.writable) {
        abort();
        return resolve();
      }
      if (stream.write(chunk)) return resolve();
      const done = () => {
        stream.off("drain", done);
        stream.off("close", done);
        resolve();
      };
      stream.on("drain", done);
      stream.on("close", done);
    });
}

/**
 * Why a follow of `run` ends now (null: it goes on): the engine was replaced (its record names
 * another run), stopped or removed, failed, or its recorded process exited.
 */
function followEnd(config: Config, run: ChosenRun, native: NativeBackend): () => Promise<string | null> {
  const name = run.engine;
  const runName = path.basename(run.dir);
  return async () => {
    const record = (await readState(config.stateDir).catch(() => null))?.engines[name];
    if (!record || ENDED.has(record.phase))
      return `${name} was stopped (${record ? `phase ${record.phase}` : "its record is gone"}); stopped following run ${runName}`;
    if (record.run_dir && record.run_dir !== run.dir)
      return `${name} was replaced: it now runs from run ${path.basename(record.run_dir)}; stopped following run ${runName} (narwhal logs ${name} -f follows the new one)`;
    if (record.phase === "failed")
      return `${name} failed (${record.last_error?.message ?? "narwhal status shows why"}); stopped following run ${runName}`;
    const h = record.handle;
    if (h?.kind === "native" && !(await native.isAlive(h).catch(() => true)))
      return `${name}'s process (pid ${h.pid}) exited; stopped following run ${runName}`;
    return null;
  };
}

async function containerFinder(config: Config, hosts: NodeHosts) {
  // Loaded only for a container engine: dockerode costs a native fleet's command a third of a second.
  const [{ ContainerBackend }, { LABEL }, { isKeptFailure }] = await Promise.all([
    import("../backends/container.js"),
    import("../backends/container-labels.js"),
    import("../backends/container-failed.js"),
  ]);
  const backend = new ContainerBackend({
    stateDir: config.stateDir,
    docker: config.docker,
    stopGraceMs: config.stopGraceMs,
    logCapBytes: config.engineLogCapBytes,
    hosts,
  });
  return {
    client: (endpoint: string | undefined) => backend.client(endpoint),
    find: async (endpoint: string | undefined, runDir: string) => {
      const docker = backend.client(endpoint);
      const listed = await docker.list([
        `${LABEL.state}=${config.stateDir}`,
        `${LABEL.run}=${runDir}`,
        `${LABEL.purpose}=engine`,
      ]);
      const c = listed.sort((a, b) => b.created - a.created)[0];
      if (!c) return null;
      const kept = isKeptFailure(c) ? ", kept after its failed start" : "";
      return { id: c.id, where: `container ${c.id.slice(0, 12)} (${c.state}${kept}) on ${docker.endpoint}` };
    },
  };
}

async function printSource(
  config: Config,
  source: LogSource,
  run: ChosenRun,
  opts: LogsOptions,
  deps: {
    write: Write;
    signal: AbortSignal;
    stop: () => Promise<string | null>;
    containers: () => ReturnType<typeof containerFinder>;
  },
): Promise<string | null> {
  const following = opts.follow && run.current;
  const tail = opts.tail !== undefined ? { tail: opts.tail } : {};
  if (source.kind === "file")
    return copyLog(source.file, deps.write, {
      ...tail,
      ...(following ? { follow: { stop: deps.stop, pollMs: FOLLOW_POLL_MS, signal: deps.signal } } : {}),
    });
  const { streamContainerLog } = await import("../backends/container-log-stream.js");
  const docker = (await deps.containers()).client(source.endpoint);
  if (!following) {
    await streamContainerLog(docker, source.id, { follow: false, ...tail, signal: deps.signal }, deps.write);
    return null;
  }
  // Docker ends the stream when the container stops; a replacement is seen in the state first.
  const ended = new AbortController();
  const signal = AbortSignal.any([deps.signal, ended.signal]);
  let why: string | null = null;
  const watch = (async () => {
    while (!signal.aborted) {
      why = await deps.stop();
      if (why) return ended.abort();
      await pause(FOLLOW_POLL_MS * 4, signal);
    }
  })();
  await streamContainerLog(docker, source.id, { follow: true, ...tail, signal }, deps.write);
  // The watch is awaited on every path (an interrupt too): its pause ends at the abort, so SIGINT exits at once.
  ended.abort();
  await watch;
  if (deps.signal.aborted) return null;
  return why ?? (await deps.stop()) ?? `container ${source.id.slice(0, 12)} stopped; stopped following`;
}

export async function logs(
  config: Config,
  engine: string,
  opts: LogsOptions,
  err: (s: string) => void,
): Promise<number> {
  const state = await readState(config.stateDir);
  const run = await chooseRun(config, state, engine, opts.choice);
  const hosts = nodeHostsFor(config);
  // The node's ssh block and Docker endpoint come from the desired state; without it the local host.
  const desired = await validateDesired(config.desiredDir).catch(() => null);
  if (desired?.state) hosts.learn(desired.state.specs);
  const spec = (name: string) => desired?.state?.specs.find((s) => s.name === name);
  const native = new NativeBackend({
    stateDir: config.stateDir,
    hostEnv: config.hostEnv,
    logCapBytes: config.engineLogCapBytes,
    hosts,
  });
  let finder: ReturnType<typeof containerFinder> | undefined;
  const containers = () => (finder ??= containerFinder(config, hosts));
  const interrupted = new AbortController();
  const onSignal = () => interrupted.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const source = await logSource(run, {
      config,
      hosts,
      spec,
      findContainer: async (endpoint, dir) => (await containers()).find(endpoint, dir),
    });
    const where =
      source.kind === "file" ? `${source.file.where}${source.note ? `; ${source.note}` : ""}` : source.where;
    const which = run.current ? "current run" : "an older run";
    err(`==> ${engine}: run ${path.basename(run.dir)} (${which}), ${where} <==`);
    if (opts.follow && !run.current)
      err(
        `narwhal: run ${path.basename(run.dir)} is not ${engine}'s current run: nothing more is written to it; not following`,
      );
    const why = await printSource(config, source, run, opts, {
      write: stdoutWriter(() => interrupted.abort()),
      signal: interrupted.signal,
      stop: followEnd(config, run, native),
      containers,
    });
    if (why) err(`narwhal: ${why}`);
    return EXIT.ok;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await hosts.close();
  }
}
