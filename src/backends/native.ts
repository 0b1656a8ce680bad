// The native backend: an engine is a process group on its node (the controller's
// machine, or one reached over ssh: every action goes through the node's
// HostAccess). It is found again after a controller crash by the launch token in
// its environment, and is "ours" only while its node's boot id and its start tick
// match the record.
import path from "node:path";
import { randomUUID, createHash } from "node:crypto";
import type { EngineSpec } from "../desired/types.js";
import type { EngineHandle, PreparedRun } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";
import { readRunEnv } from "../phases/run-env.js";
import { sleep } from "../phases/http.js";
import { IoError, nodeFaultOf, PhaseError } from "../errors.js";
import type {
  EngineBackend,
  EngineLog,
  ListOwnedOptions,
  OwnedEngine,
  ProcessDescription,
  RuntimeCheckOutput,
} from "./types.js";
import { ENGINE_LOG, readLogTail, readNodeLog } from "./engine-log.js";
import { writeFileExclusive, readJsonIfExists } from "../state/atomic-file.js";
import { noFailpoints, type Failpoint } from "../failpoints.js";
import { NODES_LISTED_AT_ONCE, type NodeHosts } from "../hosts/node-hosts.js";
import { mapBounded } from "../hosts/slots.js";
import type { HostAccess } from "../hosts/types.js";
import type { Logger } from "../log.js";
import { runOnNode, stageRun, type RunOnNode } from "./native-node-files.js";
import { cmdlineOn, groupMembersOn, isSameProcessOn, procStatOn, signalGroupOn, startTimeOn } from "./native-host.js";
import { findOwnedOn, nativeHostFor, ownedIn, scanProcessTable, type ProcessTable } from "./native-owned.js";

export const PROCESS_FILE = "native-process.json";
export { ENGINE_LOG } from "./engine-log.js";
const CHECK_TIMEOUT_MS = 120_000;

type NativeHandle = Extract<EngineHandle, { kind: "native" }>;

export interface NativeBackendOptions {
  stateDir: string;
  hostEnv: Record<string, string>;
  /** NARWHAL_ENGINE_LOG_CAP_BYTES: most bytes of engine.log read into memory. */
  logCapBytes: number;
  /** The nodes and how each is reached: every host-side action runs on the engine's own node. */
  hosts: NodeHosts;
  failpoint?: Failpoint;
  /** Where a node skipped by the orphan sweep (unreachable) is reported. */
  log?: Pick<Logger, "warn">;
}

/** Whether the handle's process runs on `host` (its node): the same boot, the same pid and start tick. */
async function aliveOn(host: HostAccess, handle: NativeHandle): Promise<boolean> {
  if (handle.boot_id !== (await host.bootId())) return false;
  return isSameProcessOn(host, handle.pid, handle.start_ticks);
}

export class NativeBackend implements EngineBackend {
  readonly kind = "native" as const;
  private readonly failpoint: Failpoint;
  constructor(private readonly opts: NativeBackendOptions) {
    this.failpoint = opts.failpoint ?? noFailpoints;
  }

  knowHosts(specs: EngineSpec[]): void {
    this.opts.hosts.learn(specs);
  }

  /**
   * The engine's environment on its node: the run's env file, scoped by state dir and node. A local
   * node starts from the controller's host environment; a remote one from its own (sshd's).
   */
  private async engineEnv(run: PreparedRun, where: RunOnNode): Promise<Record<string, string>> {
    const { env } = await readRunEnv(run.dir);
    // NARWHAL_STATE_DIR scopes ownership: two controllers on one host never adopt each other's engines.
    // NARWHAL_NODE: hosts that share a process table (test rigs, two records for one machine) never adopt each other's.
    const scope = { NARWHAL_STATE_DIR: this.opts.stateDir, NARWHAL_NODE: where.host.node };
    return where.remote ? { ...env, ...scope } : { ...this.opts.hostEnv, ...env, ...scope };
  }

  /** The interpreter's real path on the engine's node, so the identity names the runtime that node runs. */
  async runtimeIdentity(spec: EngineSpec): Promise<string> {
    let python = spec.python;
    if (python.includes("/")) {
      const r = await this.opts.hosts
        .access(spec.node.name)
        .run(["readlink", "-e", "--", python], { timeoutMs: 10_000 });
      // Not there (yet): identity by the configured path; the check reports a missing interpreter.
      if (r.code === 0 && r.stdout.trim()) python = r.stdout.trim();
    }
    const identity = {
      python,
      pythonpath: spec.launch.runtime.environment.PYTHONPATH ?? null,
      packages: spec.launch.runtime.expected_packages,
    };
    return "native:sha256:" + createHash("sha256").update(JSON.stringify(identity)).digest("hex");
  }

  readonly checkDeadlineMs = CHECK_TIMEOUT_MS;

  async runCheck(
    run: PreparedRun,
    plan: LaunchPlan,
    scriptPath: string,
    inputPath: string,
    signal: AbortSignal,
  ): Promise<RuntimeCheckOutput> {
    const where = runOnNode(this.opts.hosts, plan.node.name, run);
    const [script, input] = await stageRun(where, run, "check", [scriptPath, inputPath]);
    const env = await this.engineEnv(run, where);
    setImmediate(() => this.failpoint("native:check:running"));
    // 127 (not found) and 126 (not executable) come back as exit codes, as a shell says them: the
    // check treats them as final, unlike a run cut off by its deadline (retried).
    const r = await where.host.run([plan.command[0]!, script!, input!], {
      env,
      cwd: where.dir,
      timeoutMs: CHECK_TIMEOUT_MS,
      signal,
    });
    return {
      inspection_id: randomUUID(),
      exit_code: r.code,
      stdout: r.stdout,
      stderr: r.stderr,
      ...(r.timedOut
        ? {
            deadline: {
              message: `the runtime check exceeded its deadline of ${CHECK_TIMEOUT_MS} ms`,
              input: "the native check deadline (fixed, 120 s)",
            },
          }
        : {}),
    };
  }

  /** The node's access for a handle (a handle naming no node, or an unlearned one from this boot, is local). */
  private hostOf(handle: NativeHandle): Promise<HostAccess> {
    return nativeHostFor(this.opts.hosts, handle);
  }

  async ensureStarted(run: PreparedRun, plan: LaunchPlan, signal: AbortSignal): Promise<EngineHandle> {
    const recorded = await readJsonIfExists<EngineHandle>(path.join(run.dir, PROCESS_FILE));
    if (recorded && (await this.isAlive(recorded))) return recorded;
    const where = runOnNode(this.opts.hosts, plan.node.name, run);
    const found = (await findOwnedOn(where.host, this.opts.stateDir, run.launch_token))[0]?.handle;
    if (found) {
      await writeFileExclusive(path.join(run.dir, PROCESS_FILE), JSON.stringify(found, null, 2) + "\n");
      return found;
    }
    if (recorded) {
      throw new PhaseError(
        run.engine,
        "start",
        `the engine started from ${run.dir} (pid ${(recorded as { pid?: number }).pid}) is no longer running`,
        {
          retryable: true,
          fix: "A fresh start needs a fresh run directory; narwhal prepares one on retry. Read engine.log in the old run for the cause.",
        },
      );
    }
    signal.throwIfAborted();
    await stageRun(where, run, "start");
    const env = await this.engineEnv(run, where);
    const [cmd] = plan.command;
    this.failpoint("native:spawn:before");
    const { pid } = await where.host
      .spawnDetached(plan.command, { env, cwd: where.dir, logFile: path.posix.join(where.dir, ENGINE_LOG) })
      .catch((err: unknown) => {
        if (!(err instanceof IoError && err.path === cmd)) throw err;
        throw new PhaseError(run.engine, "start", `cannot execute ${cmd} on node ${where.host.node}: ${err.message}`, {
          input: "NARWHAL_NATIVE_PYTHON",
          retryable: false,
          fix: "Point NARWHAL_NATIVE_PYTHON at the checked Python runtime.",
        });
      });
    this.failpoint("native:spawn:after");
    const stat = await procStatOn(where.host, pid);
    const handle: EngineHandle = {
      kind: "native",
      pid,
      pgid: pid,
      boot_id: await where.host.bootId(),
      start_ticks: stat?.startTicks ?? -1,
      launch_token: run.launch_token,
      node: plan.node.name,
    };
    await writeFileExclusive(path.join(run.dir, PROCESS_FILE), JSON.stringify(handle, null, 2) + "\n");
    return handle;
  }

  async isAlive(handle: EngineHandle): Promise<boolean> {
    if (handle.kind !== "native") return false;
    return aliveOn(await this.hostOf(handle), handle);
  }

  /**
   * isAlive of each handle (in order; an Error where its node could not say). Handles on a node reached
   * over ssh are answered from one process table of the node (its boot id and one listing: two commands
   * for the node, where isAlive is a stat read for each engine); on this machine each is isAlive.
   */
  async aliveAll(handles: NativeHandle[]): Promise<Array<boolean | Error>> {
    const hosts = await Promise.all(handles.map((h) => this.hostOf(h).catch((err: unknown) => err as Error)));
    const tables = new Map<HostAccess, Promise<{ boot: string; live: Set<string> }>>();
    const tableOf = (host: HostAccess) => {
      let t = tables.get(host);
      if (!t) {
        t = Promise.all([host.bootId(), host.listProcesses()]).then(([boot, procs]) => ({
          boot,
          live: new Set(procs.filter((p) => p.state !== "Z").map((p) => `${p.pid}:${p.startTicks}`)),
        }));
        tables.set(host, t);
      }
      return t;
    };
    return Promise.all(
      handles.map(async (h, i): Promise<boolean | Error> => {
        const host = hosts[i]!;
        if (host instanceof Error) return host;
        try {
          if (host.kind === "local") return await aliveOn(host, h);
          const { boot, live } = await tableOf(host);
          return boot === h.boot_id && live.has(`${h.pid}:${h.start_ticks}`);
        } catch (err) {
          return err as Error;
        }
      }),
    );
  }

  async identityProblems(handle: EngineHandle, plan: LaunchPlan): Promise<string[]> {
    if (handle.kind !== "native") return [`handle is a ${handle.kind} engine, the plan is native`];
    if (!(await this.isAlive(handle)))
      return [`process ${handle.pid} (start tick ${handle.start_ticks}) is not running`];
    const host = await this.hostOf(handle);
    const env = (await host.processEnvs([handle.pid], ["NARWHAL_LAUNCH_TOKEN", "NARWHAL_ENGINE"])).get(handle.pid);
    const [token, engine] = [env?.NARWHAL_LAUNCH_TOKEN, env?.NARWHAL_ENGINE];
    const problems: string[] = [];
    if (token !== plan.launch_token)
      problems.push(`process ${handle.pid} carries launch token ${token ?? "none"}, not this plan's`);
    if (engine !== plan.engine) problems.push(`process ${handle.pid} belongs to ${engine ?? "no engine"}`);
    return problems;
  }

  /** A native engine gets its key through its environment (VLLM_API_KEY), not a file: observation checks 401s. */
  async keyProblems(): Promise<string[]> {
    return [];
  }

  async processStartTime(handle: EngineHandle): Promise<number | null> {
    if (handle.kind !== "native" || !(await this.isAlive(handle))) return null;
    return startTimeOn(await this.hostOf(handle), handle.start_ticks);
  }

  async describeProcess(handle: EngineHandle): Promise<ProcessDescription> {
    if (handle.kind !== "native") return { pid: null, args: [] };
    const alive = await this.isAlive(handle);
    return {
      pid: alive ? handle.pid : null,
      args: alive ? await cmdlineOn(await this.hostOf(handle), handle.pid) : [],
      boot_id: handle.boot_id,
      start_ticks: handle.start_ticks,
    };
  }

  async stop(handle: EngineHandle, graceMs: number): Promise<void> {
    if (handle.kind !== "native") return;
    const host = await this.hostOf(handle);
    // Ours while the leader is (boot id + start tick), or while members of its group still carry its
    // launch token (workers that outlived their API server). Re-checked before every signal: never a reused pid or group.
    const ours = async () =>
      (await this.isAlive(handle)) || (await groupMembersOn(host, handle.pgid, handle.launch_token)).length > 0;
    if (!(await ours())) return;
    this.failpoint("native:stop:before");
    await signalGroupOn(host, handle.pgid, "TERM");
    const deadline = Date.now() + graceMs;
    // Looks at 25, 50, then every 100 ms: an engine that exits on TERM at once is seen gone at once.
    for (let wait = 25; Date.now() < deadline && (await ours()); wait = Math.min(100, wait * 2)) await sleep(wait);
    if (await ours()) {
      await signalGroupOn(host, handle.pgid, "KILL");
      for (let i = 0; i < 50 && (await this.isAlive(handle)); i++) await sleep(100);
    }
    this.failpoint("native:stop:after");
  }

  /**
   * The engine writes engine.log itself, on its node: only its first lines and tail (within the cap) are
   * read, and for a remote node copied into the controller's run directory as evidence; with `tailBytes`
   * only that much of its end, and nothing copied.
   */
  async startupLog(run: PreparedRun, handle?: EngineHandle, opts: { tailBytes?: number } = {}): Promise<EngineLog> {
    const node = handle?.kind === "native" ? handle.node : undefined;
    const remote = node !== undefined && this.opts.hosts.spec(node)?.ssh ? runOnNode(this.opts.hosts, node, run) : null;
    const file = remote ? path.posix.join(remote.dir, ENGINE_LOG) : path.join(run.dir, ENGINE_LOG);
    if (opts.tailBytes !== undefined) return readLogTail(remote?.host ?? null, file, opts.tailBytes);
    return readNodeLog(remote?.host ?? null, file, this.opts.logCapBytes, remote ? run.dir : undefined);
  }

  /** Every node learned (and the controller's machine): a node that cannot be reached is reported and skipped. */
  async listOwned(opts: ListOwnedOptions = {}): Promise<OwnedEngine[]> {
    const hosts = this.opts.hosts;
    const known = hosts.all();
    const scans: HostAccess[] = known.map((k) => k.access);
    // Engines recorded before nodes were named, or by a command that learned no nodes (down): the local host.
    if (!known.some((k) => k.access.kind === "local")) scans.push(hosts.local());
    // Every local node record is this machine: its process table is read once, not once per record.
    let localTable: Promise<ProcessTable> | undefined;
    // The nodes at once, not one after another: a node's first command over ssh waits for its master's
    // handshake, and a fleet over many nodes would wait for them in turn.
    const perNode = await mapBounded(scans, NODES_LISTED_AT_ONCE, async (host): Promise<OwnedEngine[]> => {
      try {
        const table = host.kind === "local" ? (localTable ??= scanProcessTable(host)) : scanProcessTable(host);
        return ownedIn(host, await table, this.opts.stateDir, undefined, hosts);
      } catch (err) {
        const fault = nodeFaultOf(err);
        if (fault && opts.unlisted) opts.unlisted(fault);
        else
          this.opts.log?.warn(`orphan sweep skips node ${host.node}: ${(err as Error).message}`, { node: host.node });
        return [];
      }
    });
    const owned: OwnedEngine[] = [];
    const seen = new Set<string>();
    for (const o of perNode.flat()) {
      const h = o.handle as NativeHandle;
      const key = `${h.boot_id}:${h.pid}:${h.start_ticks}`;
      if (seen.has(key)) continue;
      seen.add(key);
      owned.push(o);
    }
    return owned;
  }
}
