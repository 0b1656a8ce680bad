// The one module that reads the process environment. Everything else gets a
// Config value, so tests can run many controllers side by side in one process.
import path from "node:path";

export interface Config {
  desiredDir: string;
  stateDir: string;
  logLevel: string;
  /** Base environment handed to native engine processes (PATH, HOME, LANG). */
  hostEnv: Record<string, string>;
  /** Retry policy: first backoff, cap, and attempts before a retryable failure turns terminal. */
  retry: { baseMs: number; capMs: number; maxAttempts: number };
  /** Watch mode: debounce for desired/ edits and the drift resync period. */
  watch: { debounceMs: number; resyncMs: number };
  /** Grace period before SIGKILL when stopping an engine. */
  stopGraceMs: number;
}

type Env = Record<string, string | undefined>;

function intFrom(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
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
    hostEnv,
    retry: {
      baseMs: intFrom(env, "NARWHAL_RETRY_BASE_MS", 1000),
      capMs: intFrom(env, "NARWHAL_RETRY_CAP_MS", 60_000),
      maxAttempts: intFrom(env, "NARWHAL_RETRY_MAX_ATTEMPTS", 5),
    },
    watch: {
      debounceMs: intFrom(env, "NARWHAL_WATCH_DEBOUNCE_MS", 300),
      resyncMs: intFrom(env, "NARWHAL_RESYNC_MS", 10_000),
    },
    stopGraceMs: intFrom(env, "NARWHAL_STOP_GRACE_MS", 10_000),
  };
}
