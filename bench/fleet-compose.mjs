// The `compose` part of bench/fleet.mjs (issue 14): narwhal against docker-compose on the same N simulator
// containers, side by side in one run. narwhal converges N container engines (bench/fleet-gen.mjs with the
// simulator image by ID, host networking); a docker-compose.yml is written from what narwhal created (each
// container's entrypoint, command, environment and binds as `docker inspect` shows them, the API key as a
// bind-mounted file where narwhal copies it in), so compose runs the very same containers. Measured: the cold
// converge of each once (narwhal `reconcile --once` from nothing; `docker-compose up -d` from nothing, and
// when its engines answer /health), then the no-op of each and the floor (`node -e 0`), interleaved, medians.
//
// Both fleets are up at once, on port blocks of their own: the no-op runs can then be interleaved (a burst of
// load on the shared machine hits both alike), which one-after-the-other could not; with host networking a
// shared block would have one fleet's engines fail to bind. Only ports differ: the compose containers'
// arguments and variables are narwhal's with each port of narwhal's block mapped to compose's.
//
// Needs a Docker Engine (DOCKER_HOST when it answers, else /var/run/docker.sock) and docker-compose (or the
// `docker compose` plugin); without either the part is skipped with one line saying why. The bench does not
// start a dockerd: CPU is the client's alone on both sides (dockerd and containerd work for both alike).
import { spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { performance } from "node:perf_hooks";
import YAML from "yaml";
import { dockerClient, ensureSimImage } from "../test/docker/sim-image.mjs";
import { generateDesired } from "./fleet-gen.mjs";
import {
  freePortBlock,
  measureCommand,
  measureNode,
  median,
  procStatFields,
  Samples,
  settleCodeCache,
} from "./measure.mjs";

const SECRET_PATH = "/run/secrets/narwhal-api-key"; // src/backends/container-key.ts
const DEFAULT_SOCKET = "/var/run/docker.sock";
const r2 = (x) => (x === null ? null : Math.round(x * 100) / 100);
/** One measurement in the shape of a median summary (runs: 1). */
const single = (m) => {
  const s = new Samples();
  s.add(m);
  return s.summary();
};

/**
 * The daemon's side of a command: the dockerd serving `host` (a unix socket named on its command line, or
 * the only dockerd when the host is the default socket) and its containerd. Their CPU seconds so far (null:
 * not found, e.g. a remote engine); /proc/<pid>/stat, in clock ticks of 10 ms.
 */
function daemonCpu(host) {
  const procs = readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .map((pid) => {
      try {
        const f = procStatFields(pid);
        const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
        // utime, stime, and cutime, cstime: the children dockerd reaped (the docker-tar of an archive call).
        return { pid, ppid: f[1], ticks: f.slice(11, 15).reduce((t, x) => t + Number(x), 0), args };
      } catch {
        return null; // gone meanwhile
      }
    })
    .filter((p) => p !== null);
  const dockerds = procs.filter((p) => path.basename(p.args[0]) === "dockerd");
  const socket = host.startsWith("unix://") ? host.slice("unix://".length) : null;
  const named = dockerds.filter((p) => socket && p.args.some((a) => a.endsWith(socket)));
  const dockerd =
    named.length === 1 ? named[0] : dockerds.length === 1 && socket === DEFAULT_SOCKET ? dockerds[0] : null;
  if (!dockerd) return null;
  const containerd = procs.filter((p) => p.ppid === dockerd.pid && path.basename(p.args[0]) === "containerd");
  return [dockerd, ...containerd].reduce((t, p) => t + p.ticks, 0) / 100;
}

/** `run()` with the daemon's CPU seconds during it added (as daemon_cpu; null when unknown). */
function withDaemon(host, run) {
  const before = daemonCpu(host);
  const m = run();
  const after = daemonCpu(host);
  return { ...m, daemonCpu: before === null || after === null ? null : after - before };
}

/** The Docker Engine to use ({ host, version }), or why there is none ({ skipped }). */
async function findEngine() {
  const candidates = [process.env.DOCKER_HOST, `unix://${DEFAULT_SOCKET}`].filter(Boolean);
  for (const host of candidates) {
    try {
      const docker = dockerClient(host);
      await docker.ping({ abortSignal: AbortSignal.timeout(5000) });
      return { host, docker, version: (await docker.version()).Version };
    } catch {
      /* the next one */
    }
  }
  return {
    skipped:
      `no Docker Engine answers (${candidates.join(", ")}): start one, e.g. \`dockerd -H unix:///tmp/d.sock ` +
      "--data-root /tmp/d --exec-root /tmp/d-exec --bridge=none --iptables=false &`, and set DOCKER_HOST=unix:///tmp/d.sock",
  };
}

/** docker-compose (Debian's 1.29) or the compose plugin: { file, args, version }, or null. */
function findCompose() {
  for (const [file, args] of [
    ["docker-compose", []],
    ["docker", ["compose"]],
  ]) {
    const r = spawnSync(file, [...args, "version", "--short"], { encoding: "utf8" });
    if (r.status === 0) return { file, args, version: `${[file, ...args].join(" ")} ${r.stdout.trim()}` };
  }
  return null;
}

/** Every string of a container's command and environment with narwhal's ports mapped to compose's block. */
function remapPorts(strings, portMap, what) {
  let mapped = 0;
  const out = strings.map((s) => {
    const m = /^(?<head>[A-Z0-9_]+=)?(?<port>\d+)$/.exec(s);
    const to = m && portMap.get(Number(m.groups.port));
    if (to === undefined || to === null) return s;
    mapped++;
    return `${m.groups.head ?? ""}${to}`;
  });
  for (const s of out)
    for (const n of s.match(/\d+/g) ?? [])
      if (portMap.has(Number(n))) throw new Error(`${what}: cannot map the port in ${JSON.stringify(s)}`);
  return { out, mapped };
}

/** compose interpolates `$`: narwhal's key wrapper has `$@` and `$(cat …)`. */
const literal = (s) => s.replaceAll("$", () => "$$");

/** The compose file of the containers narwhal runs for `state`, moved to compose's port block. */
async function composeFileFrom(docker, { state, portMap, keyFile }) {
  const listed = await docker.listContainers({
    filters: { label: [`io.narwhal.state=${state}`, "io.narwhal.purpose=engine"] },
  });
  const services = {};
  for (const c of listed) {
    const info = await docker.getContainer(c.Id).inspect();
    const engine = info.Config.Labels["io.narwhal.engine"];
    const command = remapPorts(info.Config.Cmd ?? [], portMap, engine);
    // The launch token names narwhal's run; compose's containers are no run of narwhal's.
    const env = remapPorts(
      (info.Config.Env ?? []).filter((e) => !e.startsWith("NARWHAL_LAUNCH_TOKEN=")),
      portMap,
      engine,
    );
    if (!command.out.includes("--port") || command.mapped === 0) throw new Error(`${engine}: no port to map`);
    services[engine] = {
      image: info.Config.Image,
      entrypoint: (info.Config.Entrypoint ?? []).map(literal),
      command: command.out.map(literal),
      environment: env.out.map(literal),
      volumes: [...(info.HostConfig.Binds ?? []), `${keyFile}:${SECRET_PATH}:ro`],
      network_mode: "host",
      init: info.HostConfig.Init === true,
      restart: "no",
    };
  }
  return { version: "2.4", services };
}

/** Resolves when every port answers /health 200 (compose's `up -d` returns at start, narwhal's at captured). */
async function allHealthy(ports, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  const ok = (port) =>
    fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.status === 200,
      () => false,
    );
  let waiting = ports;
  while (waiting.length > 0) {
    if (Date.now() > deadline) throw new Error(`compose: no /health 200 on ports ${waiting.join(", ")}`);
    const answers = await Promise.all(waiting.map(ok));
    waiting = waiting.filter((_, i) => !answers[i]);
    if (waiting.length > 0) await new Promise((r) => setTimeout(r, 100));
  }
}

const ids = async (docker, label) =>
  (await docker.listContainers({ filters: { label: [label] } })).map((c) => c.Id).sort();

/**
 * Run the part. `env`: the CLI's clean environment (DOCKER_HOST is added). Returns report.compose:
 * { skipped } when no engine or no compose, else the measurements.
 */
export async function composeBench({ main, env: baseEnv, work, runs, engines: n, log = console.error }) {
  const engine = await findEngine();
  if (engine.skipped) return { skipped: engine.skipped };
  const compose = findCompose();
  if (!compose) return { skipped: "neither docker-compose nor the `docker compose` plugin is installed" };
  const { docker, host } = engine;
  const env = { ...baseEnv, DOCKER_HOST: host };
  const image = await ensureSimImage({ docker, log: (m) => log(`compose: ${m}`) });

  // Two blocks of 3n ports (engine, attestation, NIXL): narwhal's, then compose's right after it.
  const span = 3 * n;
  const narwhalBase = await freePortBlock(2 * span);
  const composeBase = narwhalBase + span;
  const portMap = new Map(Array.from({ length: 3 * n }, (_, i) => [narwhalBase + i, composeBase + i]));

  const tag = `bench-${process.pid}`;
  const desired = await generateDesired(path.join(work, "compose-desired"), {
    engines: n,
    basePort: narwhalBase,
    image: image.id,
    name: tag,
  });
  const state = path.join(work, "compose-state");
  const cli = (...args) => [main, ...args, "--desired", desired, "--state", state];
  const project = `narwhal-${tag}`;
  const composeFile = path.join(work, "docker-compose.yml");
  const composeRun = (...args) =>
    measureCommand(compose.file, [...compose.args, "-p", project, "-f", composeFile, ...args], { env });
  const composeLabel = `com.docker.compose.project=${project}`;
  const narwhalLabel = `io.narwhal.state=${state}`;

  const narwhal = {};
  const other = {};
  const down = {};
  let composeUp = false;
  try {
    log(`compose: narwhal converges ${n} container engines (ports ${narwhalBase}+)`);
    const cold = withDaemon(host, () => measureNode(cli("reconcile", "--once"), { env }));
    narwhal.cold = { ...single(cold), daemon_cpu_s: r2(cold.daemonCpu) };
    const keyFile = path.join(work, "compose-api-key");
    const key = /^NARWHAL_ENGINE_API_KEY=(.*)$/m.exec(await fs.readFile(path.join(desired, "deployment.env"), "utf8"));
    await fs.writeFile(keyFile, `${key[1]}\n`, { mode: 0o400 });
    const file = await composeFileFrom(docker, { state, portMap, keyFile });
    if (Object.keys(file.services).length !== n) throw new Error(`compose: narwhal runs not ${n} containers`);
    // YAML 1.1 as docker-compose reads it (PyYAML): "no" stays a string.
    await fs.writeFile(composeFile, YAML.stringify(file, { version: "1.1" }));

    log(`compose: ${compose.version} up -d, ${n} containers (ports ${composeBase}+)`);
    composeUp = true;
    const t0 = performance.now();
    const up = withDaemon(host, () => composeRun("up", "-d"));
    other.cold = { ...single(up), daemon_cpu_s: r2(up.daemonCpu) };
    await allHealthy(Array.from({ length: n }, (_, i) => composeBase + i));
    other.cold.ready_wall_s = r2((performance.now() - t0) / 1000);

    const before = { narwhal: await ids(docker, narwhalLabel), compose: await ids(docker, composeLabel) };
    if (before.compose.length !== n) throw new Error(`compose: ${before.compose.length} of ${n} containers run`);
    settleCodeCache(() => measureNode(cli("reconcile", "--once"), { env }));
    const floor = new Samples();
    const nNoop = new Samples();
    const cNoop = new Samples();
    const daemon = { narwhal: [], compose: [] };
    for (let i = 0; i < runs; i++) {
      floor.add(measureNode(["-e", "0"], { env }));
      const a = nNoop.add(withDaemon(host, () => measureNode(cli("reconcile", "--once"), { env })));
      daemon.narwhal.push(a.daemonCpu);
      // A no-op that could not observe (Docker unreachable) is fast and wrong: it must not be measured.
      if (/ warn /.test(a.stderr)) throw new Error(`narwhal no-op warned:\n${a.stderr.slice(-1200)}`);
      const b = cNoop.add(withDaemon(host, () => composeRun("up", "-d")));
      daemon.compose.push(b.daemonCpu);
      if (/Creating|Recreating|Starting/.test(b.stderr)) throw new Error(`compose no-op acted:\n${b.stderr}`);
    }
    const after = { narwhal: await ids(docker, narwhalLabel), compose: await ids(docker, composeLabel) };
    for (const k of ["narwhal", "compose"])
      if (after[k].join() !== before[k].join()) throw new Error(`compose: a no-op replaced ${k}'s containers`);
    // Medians of the daemon's CPU during each run (null: the daemon's processes were not found).
    const daemonMedian = (xs) => (xs.includes(null) ? null : r2(median(xs)));
    narwhal.noop = { ...nNoop.summary(), daemon_cpu_s: daemonMedian(daemon.narwhal) };
    other.noop = { ...cNoop.summary(), daemon_cpu_s: daemonMedian(daemon.compose) };
    const f = floor.summary();
    const ratio = (a, b) => r2(a / b);
    const withD = (x) => (x.daemon_cpu_s === null ? null : x.cpu_s + x.daemon_cpu_s);
    return {
      engines: n,
      docker_engine: engine.version,
      compose: compose.version,
      image: image.id,
      floor: f,
      narwhal,
      docker_compose: other,
      ratios: {
        noop_cpu_narwhal_over_compose: ratio(narwhal.noop.cpu_s, other.noop.cpu_s),
        noop_wall_narwhal_over_compose: ratio(narwhal.noop.wall_s, other.noop.wall_s),
        // The client's CPU and the daemon's (dockerd + containerd) during it: work moved into the daemon counts.
        noop_cpu_with_daemon_narwhal_over_compose:
          withD(narwhal.noop) === null || withD(other.noop) === null
            ? null
            : ratio(withD(narwhal.noop), withD(other.noop)),
        noop_cpu_narwhal_over_floor: ratio(narwhal.noop.cpu_s, f.cpu_s),
        noop_cpu_compose_over_floor: ratio(other.noop.cpu_s, f.cpu_s),
        cold_wall_narwhal_over_compose_ready: ratio(narwhal.cold.wall_s, other.cold.ready_wall_s),
      },
      down,
    };
  } finally {
    const tries = [
      ["narwhal_wall_s", () => measureNode(cli("down"), { env, okCodes: [0, 1] })],
      ["compose_wall_s", () => (composeUp ? composeRun("down") : null)],
    ];
    for (const [k, run] of tries) {
      try {
        const r = run();
        if (r) down[k] = r.wall;
      } catch (e) {
        log(`compose: teardown: ${e.message}`);
      }
    }
  }
}
