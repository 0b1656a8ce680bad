// Which log `narwhal logs ENGINE` prints: the run (the current one, or an older
// one by --previous / --run), and where that run's log is: the container's own
// log on the engine's Docker endpoint (the engine container, or a failed start's
// kept one), the native engine.log on its node, or the copy in the run
// directory. Read from the state file without the lock: it works while a
// controller runs.
import fs from "node:fs/promises";
import path from "node:path";
import type { Config } from "../config.js";
import { NarwhalError } from "../errors.js";
import type { EngineRecord, StateFile } from "../state/store.js";
import { runsRoot } from "../state/run-dir.js";
import { exists } from "../state/atomic-file.js";
import { readPlan } from "../phases/prepare.js";
import { closestName } from "../desired/did-you-mean.js";
import { ENGINE_LOG } from "../backends/engine-log.js";
import { localLogFile, nodeLogFile, type LogFile } from "../backends/log-reader.js";
import type { NodeHosts } from "../hosts/node-hosts.js";
import type { EngineSpec } from "../desired/types.js";
import { START_FAILURE_FILE } from "../backends/container-failed.js";

/** Run directories of an engine, oldest first (their names start with a UTC stamp); half-built ones left out. */
export async function runDirs(stateDir: string, engine: string): Promise<string[]> {
  const root = runsRoot(stateDir, engine);
  const names = await fs.readdir(root).catch(() => [] as string[]);
  return names
    .filter((n) => !n.startsWith("."))
    .sort()
    .map((n) => path.join(root, n));
}

export interface RunChoice {
  /** How far back from the current run: 0 the current one, 1 the previous (--previous), ... */
  back?: number;
  /** A run directory's name, as `status ENGINE` and `ls state/runs/ENGINE` show it. */
  name?: string;
}

export interface ChosenRun {
  engine: string;
  dir: string;
  /** The run the engine's record names now (what a follow stays on). */
  current: boolean;
  record: EngineRecord | undefined;
}

/** Nothing to print: a terminal error naming the input at fault (exit 1). */
const usage = (message: string, fix: string, input: string) =>
  new NarwhalError(message, { retryable: false, input, fix });

/** The engine's run to print, or a usage error naming what exists. */
export async function chooseRun(
  config: Config,
  state: StateFile,
  engine: string,
  choice: RunChoice,
): Promise<ChosenRun> {
  const record = state.engines[engine];
  const runs = await runDirs(config.stateDir, engine);
  if (!record && runs.length === 0) {
    const known = Object.keys(state.engines).sort();
    const guess = closestName(engine, known);
    throw usage(
      `no engine named ${engine} in the state ${config.stateDir}${known.length ? ` (engines: ${known.join(", ")})` : " (it records no engine)"}`,
      guess ? `Did you mean ${guess}? Run narwhal logs ${guess}.` : "Name an engine narwhal status lists.",
      engine,
    );
  }
  if (runs.length === 0)
    throw usage(
      `engine ${engine} has no run directory yet under ${runsRoot(config.stateDir, engine)}: it has written no log`,
      "Wait until narwhal status shows it past prepare, then run narwhal logs again.",
      engine,
    );
  const currentDir = record?.run_dir && runs.includes(record.run_dir) ? record.run_dir : runs[runs.length - 1]!;
  const at = runs.indexOf(currentDir);
  const names = runs.map((r) => path.basename(r)).join(", ");
  let index = at;
  if (choice.name !== undefined) {
    index = runs.findIndex((r) => path.basename(r) === choice.name);
    if (index < 0)
      throw usage(
        `engine ${engine} has no run named ${choice.name} (runs, oldest first: ${names})`,
        "Name one of those runs, or count back from the current one with --run N.",
        `--run ${choice.name}`,
      );
  } else if (choice.back !== undefined) {
    index = at - choice.back;
    if (index < 0)
      throw usage(
        `engine ${engine} has ${at} run${at === 1 ? "" : "s"} before its current one (runs, oldest first: ${names}); --run ${choice.back} goes back further`,
        at ? `Use --run N with N at most ${at}, or name a run.` : "It has no previous run: drop --previous / --run.",
        choice.back === 1 ? "--previous" : `--run ${choice.back}`,
      );
  }
  return { engine, dir: runs[index]!, current: index === at, record };
}

/** Where a run's log is. */
export type LogSource =
  | { kind: "file"; file: LogFile; note?: string }
  | { kind: "container"; endpoint: string | undefined; id: string; where: string };

/** The backend a run was planned for (its launch.json), else the record's. */
async function runBackend(run: ChosenRun): Promise<string> {
  const planned = await readPlan(run.dir).then(
    ({ plan }) => (plan as { backend?: string }).backend,
    () => undefined,
  );
  return planned ?? run.record?.backend ?? "native";
}

/** The desired spec of the engine, best-effort: it names the node (ssh block, Docker endpoint). */
type SpecOf = (engine: string) => EngineSpec | undefined;

interface SourceDeps {
  config: Config;
  hosts: NodeHosts;
  spec: SpecOf;
  /** The container of this run on an endpoint (engine or kept failed), newest first; null: none. */
  findContainer: (endpoint: string | undefined, run: string) => Promise<{ id: string; where: string } | null>;
}

export async function logSource(run: ChosenRun, deps: SourceDeps): Promise<LogSource> {
  const copied = path.join(run.dir, ENGINE_LOG);
  const handle = run.record?.handle ?? null;
  const spec = deps.spec(run.engine);
  if ((await runBackend(run)) === "container") {
    const endpoint = (handle?.kind === "container" ? handle.docker_host : undefined) ?? spec?.node.docker_host;
    const found = await deps.findContainer(endpoint, run.dir);
    if (found) return { kind: "container", endpoint, id: found.id, where: found.where };
    if (await exists(copied))
      return {
        kind: "file",
        file: localLogFile(copied),
        note: "its container is gone: the log copied when it stopped",
      };
    const failed = (await exists(path.join(run.dir, START_FAILURE_FILE))) ? ` (see ${START_FAILURE_FILE})` : "";
    throw usage(
      `run ${path.basename(run.dir)} of engine ${run.engine} has no log: its container is gone from ${endpoint ?? "the default Docker endpoint"} and no ${ENGINE_LOG} was copied into ${run.dir}${failed}`,
      "Nothing more can be shown for this run; pick another with --run.",
      run.dir,
    );
  }
  const node = (handle?.kind === "native" ? handle.node : undefined) ?? spec?.node.name;
  if (node !== undefined && deps.hosts.spec(node)?.ssh) {
    const onNode = nodeLogFile(
      deps.hosts.access(node),
      path.posix.join(deps.hosts.runDirOnNode(node, run.dir), ENGINE_LOG),
    );
    // The node's file is the whole log; the controller's copy (head and tail) is what is left when the node lost it.
    if ((await onNode.size()) !== null || !(await exists(copied))) return { kind: "file", file: onNode };
    return {
      kind: "file",
      file: localLogFile(copied),
      note: `not on node ${node} any more: the copy kept as evidence`,
    };
  }
  return { kind: "file", file: localLogFile(copied) };
}
