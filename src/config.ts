// The one module that reads the process environment. Everything else gets a
// Config value, so tests can run many controllers side by side in one process.
import path from "node:path";
import { DEFAULT_LOG_ROTATION, type LogRotation } from "./log-file.js";

export interface Config {
  desiredDir: string;
  stateDir: string;
  logLevel: string;
  /** NO_COLOR set to anything but "" (no-color.org): no colour on a terminal either. */
  noColor: boolean;
  /** narwhal.log is rotated past maxBytes (NARWHAL_LOG_MAX_BYTES), keeping `keep` old files (NARWHAL_LOG_KEEP). */
  logRotation: LogRotation;
  /** Base environment handed to native engine processes (PATH, HOME, LANG). */
  hostEnv: Record<string, string>;
  /**
   * Retry policy: first backoff, cap, and attempts before a retryable failure turns terminal;
   * and how long `reconcile --once` outwaits a cause outside narwhal's control (a missing image
   * or device, a stranger on a port, the Docker daemon down) before it gives up and exits 2.
   */
  retry: { baseMs: number; capMs: number; maxAttempts: number; onceOutwaitMs: number };
  /** Watch mode: debounce for desired/ edits and the drift resync period. */
  watch: { debounceMs: number; resyncMs: number };
  /** Grace period before SIGKILL when stopping an engine. */
  stopGraceMs: number;
  /**
   * The controller's work queue: how many engines (and the fleet's planning) are worked on at
   * once (NARWHAL_CONCURRENCY), and how long SIGTERM lets running work settle before the
   * controller abandons it at its next await (NARWHAL_SHUTDOWN_GRACE_MS). Engines keep running.
   * nodeConcurrency (NARWHAL_NODE_CONCURRENCY, 0: unbounded): how many engines' inspections, runtime
   * checks and starts run on one node at once (src/controller/node-slots.ts).
   */
  queue: { concurrency: number; shutdownGraceMs: number; nodeConcurrency: number };
  /** How long engines sharing a GPU wait for each other before a shared start. */
  sharedStartWaitMs: number;
  docker: DockerConfig;
  /**
   * Most bytes of an engine's log narwhal reads or keeps (engine.log copies, error excerpts):
   * the first lines and the tail; the rest stays in the engine's own log.
   */
  engineLogCapBytes: number;
  /** Deadline of one KV-transfer proof of a prefill → decode pair (NARWHAL_KV_PROOF_TIMEOUT_MS). */
  kvProofTimeoutMs: number;
  /**
   * Run directories kept per engine beyond those the state points to (NARWHAL_KEEP_RUNS, default 5):
   * `narwhal prune` and watch mode (after converging) remove older ones.
   */
  keepRuns: number;
  /**
   * Watch mode's Prometheus endpoint: where /metrics and /healthz listen (NARWHAL_METRICS_ADDRESS,
   * HOST:PORT or a bare PORT on loopback; undefined: off), and how recently the controller loop must
   * have ended for /healthz to answer 200 (NARWHAL_HEALTHZ_WITHIN_MS, default 3 resync periods, at least 30 s).
   */
  metrics: { address?: string; aliveWithinMs: number };
  /** Crash-test kill points (NARWHAL_FAILPOINTS); empty in production. */
  failpoints?: string;
  /**
   * The role shell's environment, for `narwhal engine` actions only: the seed's operator
   * inputs (NARWHAL_ENGINE_LAUNCH_CONFIG, NARWHAL_MODEL_REVISION, NARWHAL_ENGINE_ARGS, ...).
   */
  startupEnv: Readonly<Record<string, string | undefined>>;
}

/** Per-call deadlines for the Docker Engine API (ms). */
export interface DockerTimeouts {
  ping: number;
  inspect: number;
  list: number;
  create: number;
  start: number;
  /** Added to the stop grace period: the daemon's own SIGKILL escalation needs time too. */
  stop: number;
  remove: number;
  logs: number;
  /** A temporary check container's whole run. */
  check: number;
}

export interface DockerConfig {
  /** DOCKER_HOST; undefined means the local socket. */
  host?: string;
  tlsVerify: boolean;
  certPath?: string;
  timeouts: DockerTimeouts;
}

type Env = Record<string, string | undefined>;

function intFrom(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0)
    throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  return n;
}

export function loadConfig(
  overrides: { desired?: string; state?: string } = {},
  env: Env = process.env,
  cwd: string = process.cwd(),
): Config {
  const hostEnv: Record<string, string> = {};
  for (const key of ["PATH", "HOME", "LANG", "LC_ALL", "TZ"]) {
    const value = env[key];
    if (value !== undefined) hostEnv[key] = value;
  }
  return {
    desiredDir: path.resolve(cwd, overrides.desired ?? env.NARWHAL_DESIRED ?? "desired"),
    stateDir: path.resolve(cwd, overrides.state ?? env.NARWHAL_STATE ?? "state"),
    logLevel: env.NARWHAL_LOG_LEVEL ?? "info",
    noColor: (env.NO_COLOR ?? "") !== "",
    logRotation: {
      maxBytes: intFrom(env, "NARWHAL_LOG_MAX_BYTES", DEFAULT_LOG_ROTATION.maxBytes),
      keep: intFrom(env, "NARWHAL_LOG_KEEP", DEFAULT_LOG_ROTATION.keep),
    },
    hostEnv,
    retry: {
      baseMs: intFrom(env, "NARWHAL_RETRY_BASE_MS", 1000),
      capMs: intFrom(env, "NARWHAL_RETRY_CAP_MS", 60_000),
      maxAttempts: intFrom(env, "NARWHAL_RETRY_MAX_ATTEMPTS", 5),
      onceOutwaitMs: intFrom(env, "NARWHAL_ONCE_OUTWAIT_MS", 120_000),
    },
    watch: {
      debounceMs: intFrom(env, "NARWHAL_WATCH_DEBOUNCE_MS", 100),
      resyncMs: intFrom(env, "NARWHAL_RESYNC_MS", 10_000),
    },
    stopGraceMs: intFrom(env, "NARWHAL_STOP_GRACE_MS", 10_000),
    queue: {
      concurrency: Math.max(1, intFrom(env, "NARWHAL_CONCURRENCY", 8)),
      shutdownGraceMs: intFrom(env, "NARWHAL_SHUTDOWN_GRACE_MS", 3_000),
      nodeConcurrency: Math.max(0, intFrom(env, "NARWHAL_NODE_CONCURRENCY", 4)),
    },
    sharedStartWaitMs: intFrom(env, "NARWHAL_SHARED_START_WAIT_MS", 30_000),
    keepRuns: intFrom(env, "NARWHAL_KEEP_RUNS", 5),
    metrics: {
      address: env.NARWHAL_METRICS_ADDRESS || undefined,
      aliveWithinMs: intFrom(
        env,
        "NARWHAL_HEALTHZ_WITHIN_MS",
        Math.max(30_000, 3 * intFrom(env, "NARWHAL_RESYNC_MS", 10_000)),
      ),
    },
    failpoints: env.NARWHAL_FAILPOINTS || undefined,
    engineLogCapBytes: intFrom(env, "NARWHAL_ENGINE_LOG_CAP_BYTES", 16 * 1024 * 1024),
    kvProofTimeoutMs: intFrom(env, "NARWHAL_KV_PROOF_TIMEOUT_MS", 60_000),
    startupEnv: Object.freeze({ ...env }),
    docker: {
      host: env.DOCKER_HOST || undefined,
      tlsVerify: env.DOCKER_TLS_VERIFY === "1",
      certPath: env.DOCKER_CERT_PATH || undefined,
      timeouts: {
        ping: intFrom(env, "NARWHAL_DOCKER_PING_MS", 5_000),
        inspect: intFrom(env, "NARWHAL_DOCKER_INSPECT_MS", 10_000),
        list: intFrom(env, "NARWHAL_DOCKER_LIST_MS", 10_000),
        create: intFrom(env, "NARWHAL_DOCKER_CREATE_MS", 30_000),
        start: intFrom(env, "NARWHAL_DOCKER_START_MS", 30_000),
        stop: intFrom(env, "NARWHAL_DOCKER_STOP_MS", 30_000),
        remove: intFrom(env, "NARWHAL_DOCKER_REMOVE_MS", 30_000),
        logs: intFrom(env, "NARWHAL_DOCKER_LOGS_MS", 15_000),
        check: intFrom(env, "NARWHAL_DOCKER_CHECK_MS", 180_000),
      },
    },
  };
}
