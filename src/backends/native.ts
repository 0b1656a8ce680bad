// The native backend: an engine is a process group on this host. It is found
// again after a controller crash by the launch token in its environment, and
// is "ours" only while its boot id and start tick match the record.
import fs from "node:fs/promises";
import { realpathSync } from "node:fs";
import path from "node:path";
import { spawn, execFile } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import type { EngineSpec } from "../desired/types.js";
import type { EngineHandle, PreparedRun } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";
import { parseEnvFile } from "../phases/plan.js";
import { PhaseError } from "../errors.js";
import type { EngineBackend, EngineLog, OwnedEngine, ProcessDescription, RuntimeCheckOutput } from "./types.js";
import { ENGINE_LOG, readLogFile } from "./engine-log.js";
import { isSameProcess, listPids, readBootId, readProcEnviron, readProcStat } from "./proc.js";
import { writeFileExclusive, readJsonIfExists } from "../state/atomic-file.js";
import { noFailpoints, type Failpoint } from "../failpoints.js";
import type { NodeHosts } from "../hosts/node-hosts.js";

export const PROCESS_FILE = "native-process.json";
export { ENGINE_LOG } from "./engine-log.js";
const CHECK_TIMEOUT_MS = 120_000;
const CLK_TCK = 100; // USER_HZ on every Linux ABI narwhal supports

export interface NativeBackendOptions {
  stateDir: string;
  hostEnv: Record<string, string>;
  /** NARWHAL_ENGINE_LOG_CAP_BYTES: most bytes of engine.log read into memory. */
  logCapBytes: number;
  /** The nodes and how each is reached: every host-side action runs on the engine's own node. */
  hosts: NodeHosts;
  failpoint?: Failpoint;
}

async function engineEnv(
  run: PreparedRun,
  hostEnv: Record<string, string>,
  stateDir: string,
): Promise<Record<string, string>> {
  const env = parseEnvFile(await fs.readFile(path.join(run.dir, "container.env"), "utf8"));
  // NARWHAL_STATE_DIR scopes ownership: two controllers on one host never adopt each other's engines.
  return { ...hostEnv, ...env, NARWHAL_STATE_DIR: stateDir };
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

  async runtimeIdentity(spec: EngineSpec): Promise<string> {
    let python = spec.python;
    try {
      python = realpathSync(spec.python);
    } catch {
      /* a bare name on PATH: identity by name */
    }
    const identity = {
      python,
      pythonpath: spec.launch.runtime.environment.PYTHONPATH ?? null,
      packages: spec.launch.runtime.expected_packages,
    };
    return "native:sha256:" + createHash("sha256").update(JSON.stringify(identity)).digest("hex");
  }

  async runCheck(
    run: PreparedRun,
    plan: LaunchPlan,
    scriptPath: string,
    inputPath: string,
    signal: AbortSignal,
  ): Promise<RuntimeCheckOutput> {
    const env = await engineEnv(run, this.opts.hostEnv, this.opts.stateDir);
    const inspectionId = randomUUID();
    return new Promise((resolve) => {
      setImmediate(() => this.failpoint("native:check:running"));
      execFile(
        plan.command[0]!,
        [scriptPath, inputPath],
        { env, cwd: run.dir, signal, timeout: CHECK_TIMEOUT_MS, maxBuffer: 8 * 1024 * 1024 },
        (err, stdout, stderr) => {
          const errno = (err as { code?: unknown } | null)?.code;
          // An interpreter that cannot be executed fails the same way every time: report it as a
          // shell does (127 not found, 126 not executable), an exit the check treats as final,
          // not as a run that produced nothing (a timeout, which is retried).
          const notRunnable = errno === "ENOENT" || errno === "ENOTDIR" ? 127 : errno === "EACCES" ? 126 : null;
          const code = err ? (typeof errno === "number" ? errno : notRunnable) : 0;
          // execFile's timeout kills the check: a deadline, with the partial output kept.
          // (maxBuffer also kills the child, but says so in its code.)
          const killed = err as { killed?: boolean; code?: unknown } | null;
          const timedOut = !!killed?.killed && killed.code !== "ERR_CHILD_PROCESS_STDIO_MAXBUFFER" && !signal.aborted;
          resolve({
            inspection_id: inspectionId,
            exit_code: code,
            stdout: String(stdout),
            stderr: String(stderr) + (err && typeof errno !== "number" ? `\n${err.message}` : ""),
            ...(timedOut
              ? {
                  deadline: {
                    message: `the runtime check exceeded its deadline of ${CHECK_TIMEOUT_MS} ms`,
                    input: "the native check deadline (fixed, 120 s)",
                  },
                }
              : {}),
          });
        },
      );
    });
  }

  private async findByToken(token: string): Promise<EngineHandle | null> {
    const bootId = await readBootId();
    for (const pid of await listPids()) {
      const env = await readProcEnviron(pid);
      if (env?.NARWHAL_LAUNCH_TOKEN !== token || env.NARWHAL_STATE_DIR !== this.opts.stateDir) continue;
      const stat = await readProcStat(pid);
      // The group leader is the process whose pgid is its own pid (spawned detached).
      if (stat && stat.state !== "Z" && stat.pgid === pid) {
        return { kind: "native", pid, pgid: pid, boot_id: bootId, start_ticks: stat.startTicks, launch_token: token };
      }
    }
    return null;
  }

  async ensureStarted(run: PreparedRun, plan: LaunchPlan, signal: AbortSignal): Promise<EngineHandle> {
    const recorded = await readJsonIfExists<EngineHandle>(path.join(run.dir, PROCESS_FILE));
    if (recorded && (await this.isAlive(recorded))) return recorded;
    const found = await this.findByToken(run.launch_token);
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
    const env = await engineEnv(run, this.opts.hostEnv, this.opts.stateDir);
    const log = await fs.open(path.join(run.dir, ENGINE_LOG), "a", 0o600);
    try {
      const [cmd, ...args] = plan.command;
      this.failpoint("native:spawn:before");
      const child = spawn(cmd!, args, { env, cwd: run.dir, detached: true, stdio: ["ignore", log.fd, log.fd] });
      const pid = await new Promise<number>((resolve, reject) => {
        child.once("error", (err) =>
          reject(
            new PhaseError(run.engine, "start", `cannot execute ${cmd}: ${err.message}`, {
              input: "NARWHAL_NATIVE_PYTHON",
              retryable: false,
              fix: "Point NARWHAL_NATIVE_PYTHON at the checked Python runtime.",
            }),
          ),
        );
        child.once("spawn", () => resolve(child.pid!));
      });
      child.unref();
      this.failpoint("native:spawn:after");
      const stat = await readProcStat(pid);
      const handle: EngineHandle = {
        kind: "native",
        pid,
        pgid: pid,
        boot_id: await readBootId(),
        start_ticks: stat?.startTicks ?? -1,
        launch_token: run.launch_token,
      };
      await writeFileExclusive(path.join(run.dir, PROCESS_FILE), JSON.stringify(handle, null, 2) + "\n");
      return handle;
    } finally {
      await log.close();
    }
  }

  async isAlive(handle: EngineHandle): Promise<boolean> {
    if (handle.kind !== "native") return false;
    if (handle.boot_id !== (await readBootId())) return false;
    return isSameProcess(handle.pid, handle.start_ticks);
  }

  async identityProblems(handle: EngineHandle, plan: LaunchPlan): Promise<string[]> {
    if (handle.kind !== "native") return [`handle is a ${handle.kind} engine, the plan is native`];
    if (!(await this.isAlive(handle)))
      return [`process ${handle.pid} (start tick ${handle.start_ticks}) is not running`];
    const env = await readProcEnviron(handle.pid);
    const problems: string[] = [];
    if (env?.NARWHAL_LAUNCH_TOKEN !== plan.launch_token)
      problems.push(
        `process ${handle.pid} carries launch token ${env?.NARWHAL_LAUNCH_TOKEN ?? "none"}, not this plan's`,
      );
    if (env?.NARWHAL_ENGINE !== plan.engine)
      problems.push(`process ${handle.pid} belongs to ${env?.NARWHAL_ENGINE ?? "no engine"}`);
    return problems;
  }

  /** A native engine gets its key through its environment (VLLM_API_KEY), not a file: observation checks 401s. */
  async keyProblems(): Promise<string[]> {
    return [];
  }

  async processStartTime(handle: EngineHandle): Promise<number | null> {
    if (handle.kind !== "native" || !(await this.isAlive(handle))) return null;
    const stat = await fs.readFile("/proc/stat", "utf8");
    const btime = Number(/^btime (\d+)$/m.exec(stat)?.[1]);
    return Number.isFinite(btime) ? btime + handle.start_ticks / CLK_TCK : null;
  }

  async describeProcess(handle: EngineHandle): Promise<ProcessDescription> {
    if (handle.kind !== "native") return { pid: null, args: [] };
    const alive = await this.isAlive(handle);
    const cmdline = alive ? await fs.readFile(`/proc/${handle.pid}/cmdline`, "utf8").catch(() => "") : "";
    return {
      pid: alive ? handle.pid : null,
      args: cmdline.split("\0").filter((a, i, all) => a !== "" || i < all.length - 1),
      boot_id: handle.boot_id,
      start_ticks: handle.start_ticks,
    };
  }

  async stop(handle: EngineHandle, graceMs: number): Promise<void> {
    if (handle.kind !== "native") return;
    // Ours while the leader is (boot id + start tick), or while members of its group still carry its
    // launch token (workers that outlived their API server). Never signal a reused pid or group.
    if (!(await this.isAlive(handle)) && !(await groupHasMembers(handle.pgid, handle.launch_token))) return;
    const signalGroup = (sig: NodeJS.Signals) => {
      try {
        process.kill(-handle.pgid, sig);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
      }
    };
    this.failpoint("native:stop:before");
    signalGroup("SIGTERM");
    const deadline = Date.now() + graceMs;
    while (
      Date.now() < deadline &&
      ((await this.isAlive(handle)) || (await groupHasMembers(handle.pgid, handle.launch_token)))
    ) {
      await new Promise((r) => setTimeout(r, 100));
    }
    if ((await this.isAlive(handle)) || (await groupHasMembers(handle.pgid, handle.launch_token))) {
      signalGroup("SIGKILL");
      for (let i = 0; i < 50 && (await this.isAlive(handle)); i++) await new Promise((r) => setTimeout(r, 100));
    }
    this.failpoint("native:stop:after");
  }

  /** The engine writes engine.log itself; only its first lines and tail (within the cap) are read. */
  startupLog(run: PreparedRun): Promise<EngineLog> {
    return readLogFile(path.join(run.dir, ENGINE_LOG), this.opts.logCapBytes);
  }

  async listOwned(): Promise<OwnedEngine[]> {
    const bootId = await readBootId();
    const owned: OwnedEngine[] = [];
    for (const pid of await listPids()) {
      const env = await readProcEnviron(pid);
      if (!env?.NARWHAL_LAUNCH_TOKEN || env.NARWHAL_STATE_DIR !== this.opts.stateDir || !env.NARWHAL_ENGINE) continue;
      const stat = await readProcStat(pid);
      if (!stat || stat.state === "Z" || stat.pgid !== pid) continue;
      const runDir = await fs.readlink(`/proc/${pid}/cwd`).catch(() => undefined);
      owned.push({
        ...(runDir ? { run_dir: runDir } : {}),
        engine: env.NARWHAL_ENGINE,
        launch_token: env.NARWHAL_LAUNCH_TOKEN,
        handle: {
          kind: "native",
          pid,
          pgid: pid,
          boot_id: bootId,
          start_ticks: stat.startTicks,
          launch_token: env.NARWHAL_LAUNCH_TOKEN,
        },
      });
    }
    return owned;
  }
}

/** Any live (non-zombie) process still in the group that carries this launch token. */
async function groupHasMembers(pgid: number, token: string): Promise<boolean> {
  for (const pid of await listPids()) {
    const stat = await readProcStat(pid);
    if (
      stat &&
      stat.pgid === pgid &&
      stat.state !== "Z" &&
      (await readProcEnviron(pid))?.NARWHAL_LAUNCH_TOKEN === token
    )
      return true;
  }
  return false;
}
