// vitest globalSetup for the `docker` project: finds or starts a Docker Engine
// and builds the simulator images once, then hands both to the tests through
// provide/inject (globalSetup runs in the main process, tests in workers, so
// tests pass `inject("dockerHost")` explicitly as DOCKER_HOST to CLIs they spawn).
//
// Engine, in order: DOCKER_HOST when it answers a ping; /var/run/docker.sock when
// it answers; else a private `dockerd` on its own socket and exec root under a
// temp dir (data root in a fixed dir under the temp dir so the next run reuses
// the simulator image), stopped again in teardown. When dockerd is missing and
// we are root on Debian, `docker.io` is installed with apt-get first.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, openSync, closeSync, readFileSync, writeFileSync, unlinkSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type Docker from "dockerode";
import type { TestProject } from "vitest/node";
import { unmountUnder } from "./mounts.js";
import { dockerClient, ensureSimImage } from "./sim-image.mjs";

declare module "vitest" {
  export interface ProvidedContext {
    /** unix:// (or tcp://…) URI of the engine the Docker tests use */
    dockerHost: string;
    /** true when this test run started its own dockerd */
    dockerPrivate: boolean;
    /** the image ID (`sha256:…`) of `narwhal-sim:<hash>`, variant a: desired states name images by identity (seed 000) */
    simImage: string;
    simImageId: string;
    /** `narwhal-sim:<hash>`, variant a, for tests of what a tag does */
    simImageTag: string;
    /** a second simulator image with a different image ID (variant b), by ID */
    simImageB: string;
    simImageBId: string;
    simImageBTag: string;
  }
}

const DEFAULT_SOCKET = "/var/run/docker.sock";
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 20_000;
const BASE = path.join(os.tmpdir(), "narwhal-docker-test");

function log(msg: string): void {
  process.stderr.write(`[docker setup] ${msg}\n`);
}

async function ping(docker: Docker, timeoutMs = 5_000): Promise<boolean> {
  try {
    // @types/dockerode omits ping's options; dockerode 4 honours abortSignal
    const pingWith = docker.ping as unknown as (this: Docker, o: { abortSignal: AbortSignal }) => Promise<unknown>;
    await pingWith.call(docker, { abortSignal: AbortSignal.timeout(timeoutMs) });
    return true;
  } catch {
    return false;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function findDockerd(): string | null {
  const dirs = ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", ...(process.env.PATH ?? "").split(":")];
  for (const d of dirs) {
    if (!d) continue;
    const p = path.join(d, "dockerd");
    if (existsSync(p)) return p;
  }
  return null;
}

const isRoot = (): boolean => process.getuid?.() === 0;

function installDockerIo(): void {
  log("dockerd not found: installing docker.io with apt-get");
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [["update"], ["install", "-y", "--no-install-recommends", "docker.io"]]) {
    // Other suites may be installing at once (the rig's sshd): wait for dpkg's lock rather than fail.
    const r = spawnSync("apt-get", ["-o", "DPkg::Lock::Timeout=300", ...args], {
      stdio: ["ignore", "inherit", "inherit"],
      env,
    });
    if (r.status !== 0)
      throw new Error(`apt-get ${args.join(" ")} failed (exit ${r.status ?? r.signal}); install docker.io by hand`);
  }
}

function ensureDockerd(): string {
  const found = findDockerd();
  if (found) return found;
  if (isRoot() && existsSync("/etc/debian_version")) {
    installDockerIo();
    const after = findDockerd();
    if (after) return after;
    throw new Error("docker.io installed but dockerd is still not on the PATH");
  }
  throw new Error(
    "Docker tests need a Docker Engine: set DOCKER_HOST to a running one, or install Docker (Debian/Ubuntu: apt-get install docker.io) and run the tests as root",
  );
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The shared data root (kept between runs, so the image is reused) unless another live run holds it. */
function claimDataRoot(runDir: string): { dataRoot: string; release: () => void } {
  const lock = path.join(BASE, "owner.pid");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lock, "wx");
      writeFileSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return {
        dataRoot: path.join(BASE, "data"),
        release: () => {
          try {
            if (readFileSync(lock, "utf8").trim() === String(process.pid)) unlinkSync(lock);
          } catch {
            /* already gone */
          }
        },
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      const owner = Number(readFileSync(lock, "utf8").trim());
      if (Number.isInteger(owner) && owner > 0 && pidAlive(owner)) break;
      unlinkSync(lock); // stale: its run is gone
    }
  }
  log(`shared data root ${BASE}/data is in use by another run; using a throwaway one`);
  return { dataRoot: path.join(runDir, "data"), release: () => {} };
}

async function tail(file: string, lines = 30): Promise<string> {
  const text = await fs.readFile(file, "utf8").catch(() => "");
  return text.trimEnd().split("\n").slice(-lines).join("\n");
}

function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    child.once("exit", () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

export interface PrivateDaemon {
  host: string;
  docker: Docker;
  /** Remove every container, stop dockerd, and delete its run directory. */
  stop: () => Promise<void>;
  /**
   * Stop dockerd only (SIGTERM, as a daemon restart does), keeping its data, exec root and
   * socket path: starting it again with the same `runDir` and `dataRoot` is a daemon outage.
   */
  halt: () => Promise<void>;
}

export interface PrivateDaemonOptions {
  /** The daemon's run directory (socket, exec root, log); default a fresh one under BASE. */
  runDir?: string;
  /** Its data root; default the shared one under BASE (or a throwaway when another run holds it). */
  dataRoot?: string;
  /**
   * A network namespace (a path such as /run/netns/<name>) to run dockerd in: a rig host's own
   * daemon (test/rig), whose host-network containers are then in that host's namespace. Joined
   * with nsenter, which keeps the mount namespace (and the cgroup mounts under /sys that
   * `ip netns exec` would replace).
   */
  netns?: string;
  /** More dockerd flags (the rig's --cgroup-parent, so a killed run's containers are found by name). */
  args?: string[];
}

/** Start a dockerd of this test run's own (root only); the global setup's, or one a test stops and starts. */
export async function startPrivateDaemon(opts: PrivateDaemonOptions = {}): Promise<PrivateDaemon> {
  const dockerd = ensureDockerd();
  if (!isRoot()) {
    throw new Error(
      "Docker tests need a Docker Engine: no DOCKER_HOST or /var/run/docker.sock answers, and starting a private dockerd needs root",
    );
  }
  await fs.mkdir(BASE, { recursive: true });
  const runDir = opts.runDir ?? (await fs.mkdtemp(path.join(BASE, "run-")));
  await fs.mkdir(runDir, { recursive: true });
  const { dataRoot, release } = opts.dataRoot ? { dataRoot: opts.dataRoot, release: () => {} } : claimDataRoot(runDir);
  const execRoot = path.join(runDir, "exec");
  const socket = path.join(runDir, "docker.sock");
  const logFile = path.join(runDir, "dockerd.log");
  const pidFile = path.join(runDir, "dockerd.pid");
  await fs.mkdir(dataRoot, { recursive: true });
  const out = openSync(logFile, "a");
  const child = spawn(
    opts.netns ? "nsenter" : dockerd,
    [
      ...(opts.netns ? [`--net=${opts.netns}`, "--", dockerd] : []),
      "--data-root",
      dataRoot,
      "--exec-root",
      execRoot,
      "-H",
      `unix://${socket}`,
      "--pidfile",
      pidFile,
      "--iptables=false",
      "--ip-masq=false",
      "--bridge=none",
      ...(opts.args ?? []),
    ],
    { stdio: ["ignore", out, out] },
  );
  closeSync(out);
  let exited = false;
  child.on("exit", () => (exited = true));
  // Last resort if the main process dies without running teardown.
  const onExit = (): void => {
    if (!exited) child.kill("SIGTERM");
  };
  process.on("exit", onExit);

  const host = `unix://${socket}`;
  const docker = dockerClient(host);

  const halt = async (): Promise<void> => {
    process.off("exit", onExit);
    if (exited) return;
    child.kill("SIGTERM");
    if (!(await waitExit(child, STOP_TIMEOUT_MS))) {
      log(`dockerd did not stop in ${STOP_TIMEOUT_MS} ms; killing it`);
      child.kill("SIGKILL");
      await waitExit(child, 5_000);
    }
  };

  const stop = async (): Promise<void> => {
    if (!exited) {
      // Every container on a private engine is this run's: remove them so nothing outlives the daemon.
      try {
        const all = await docker.listContainers({ all: true, abortSignal: AbortSignal.timeout(10_000) });
        await Promise.all(
          all.map((c) =>
            docker
              .getContainer(c.Id)
              .remove({ force: true })
              .catch(() => {}),
          ),
        );
      } catch {
        /* the daemon is going away anyway */
      }
    }
    await halt();
    // dockerd stops its managed containerd; kill it if SIGKILL left it behind
    for (const f of [path.join(execRoot, "containerd/containerd.pid")]) {
      const pid = Number((await fs.readFile(f, "utf8").catch(() => "")).trim());
      if (pid > 0 && pidAlive(pid)) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          /* gone */
        }
      }
    }
    release();
    unmountUnder(runDir);
    unmountUnder(dataRoot);
    try {
      await fs.rm(runDir, { recursive: true, force: true });
    } catch (e) {
      log(`left ${runDir} behind: ${(e as Error).message}`);
    }
  };

  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!(await ping(docker, 2_000))) {
    if (exited || Date.now() > deadline) {
      const why = exited
        ? `dockerd exited (${child.exitCode ?? child.signalCode})`
        : `dockerd did not answer within ${START_TIMEOUT_MS} ms`;
      const logTail = await tail(logFile);
      await stop();
      throw new Error(`${why}; log ${logFile}:\n${logTail}`);
    }
    await sleep(250);
  }
  log(`started private dockerd pid ${child.pid} on ${host} (data root ${dataRoot})`);
  return { host, docker, stop, halt };
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let host: string | null = null;
  let docker: Docker | null = null;
  let stop: () => Promise<void> = async () => {};

  const candidates: string[] = [];
  if (process.env.DOCKER_HOST) candidates.push(process.env.DOCKER_HOST);
  if (existsSync(DEFAULT_SOCKET)) candidates.push(`unix://${DEFAULT_SOCKET}`);
  for (const c of candidates) {
    const d = dockerClient(c);
    if (await ping(d)) {
      host = c;
      docker = d;
      log(`using Docker Engine at ${c}`);
      break;
    }
    log(`${c} does not answer`);
  }
  let isPrivate = false;
  if (!host || !docker) {
    const p = await startPrivateDaemon();
    host = p.host;
    docker = p.docker;
    stop = p.stop;
    isPrivate = true;
  }

  try {
    const a = await ensureSimImage({ docker, variant: "a", log });
    const b = await ensureSimImage({ docker, variant: "b", log });
    log(
      `simulator images: ${a.tag} (${a.built ? `built in ${a.buildMs} ms` : "reused"}), ${b.tag} (${b.built ? `built in ${b.buildMs} ms` : "reused"})`,
    );
    project.provide("dockerHost", host);
    project.provide("dockerPrivate", isPrivate);
    project.provide("simImage", a.id);
    project.provide("simImageId", a.id);
    project.provide("simImageTag", a.tag);
    project.provide("simImageB", b.id);
    project.provide("simImageBId", b.id);
    project.provide("simImageBTag", b.tag);
  } catch (e) {
    await stop();
    throw e;
  }
  return stop;
}
