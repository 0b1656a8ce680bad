// Runs the built CLI as a real process, and finds the engine processes a
// state directory owns by the identity narwhal gives them (environ in /proc).
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { REPO } from "./sim-fleet.js";
import type { StatusView } from "../../src/cli/status-view.js";
import type { Condition } from "../../src/state/store.js";
import { KV_CONDITION } from "../../src/controller/kv-condition.js";

export const CLI = path.join(REPO, "dist/bundle/main.js");

/** Fast retries so fault tests settle in seconds. */
export const TEST_ENV = {
  NARWHAL_RETRY_BASE_MS: "200",
  NARWHAL_RETRY_CAP_MS: "1000",
  NARWHAL_RETRY_MAX_ATTEMPTS: "2",
  NARWHAL_STOP_GRACE_MS: "3000",
  NARWHAL_WATCH_DEBOUNCE_MS: "200",
  NARWHAL_RESYNC_MS: "1000",
};

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The environment the CLI runs in: the runner's, TEST_ENV and `extra`, but no NODE_EXTRA_CA_CERTS. Where the
 * runner's environment names a CA bundle (this machine's tool shell names the system's), every node start loads
 * it: ~35 ms of CPU a command (`node -e 0` 0.026 -> 0.061 s), and three CLI-heavy e2e files took 12% less wall
 * time without it (18.9 / 18.5 -> 16.6 / 16.9 s, run in turn). No test relies on it: the CLI reaches Docker's TLS
 * endpoints with their own CA, and nothing public.
 */
export function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...TEST_ENV, ...extra };
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

export function startCli(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], {
    env: cliEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
}

export function runCli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return collect(startCli(args, env));
}

/** A child's exit code and all it wrote (its stdout and stderr are pipes). */
export function collect(child: ChildProcess): Promise<CliResult> {
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (stdout += d));
  child.stderr!.on("data", (d) => (stderr += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

/**
 * `status --format json`. DESIRED is read from desired/: by default the test tree's own (beside its
 * state directory, as simFleet lays them out), never the repository's ./desired.
 */
export async function status(
  stateDir: string,
  desiredDir = path.join(path.dirname(stateDir), "desired"),
): Promise<StatusView> {
  const r = await runCli(["status", "--state", stateDir, "--desired", desiredDir, "--format", "json"]);
  if (r.code !== 0) throw new Error(`status failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as StatusView;
}

/** Group leaders whose environment names this state directory, with their environment. */
async function ownedLeaders(stateDir: string): Promise<Array<{ pid: number; vars: Record<string, string> }>> {
  const out: Array<{ pid: number; vars: Record<string, string> }> = [];
  for (const name of await fs.readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const environ = await fs.readFile(`/proc/${name}/environ`, "utf8");
      const stat = await fs.readFile(`/proc/${name}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] === "Z" || Number(fields[2]) !== Number(name)) continue;
      const vars = Object.fromEntries(
        environ.split("\0").map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
      );
      if (vars.NARWHAL_STATE_DIR === stateDir) out.push({ pid: Number(name), vars });
    } catch {
      /* gone or not ours */
    }
  }
  return out;
}

/** Engine processes (group leaders) whose environment names this state directory. */
export async function engineProcesses(stateDir: string): Promise<Array<{ pid: number; engine: string }>> {
  return (await ownedLeaders(stateDir))
    .filter((p) => p.vars.NARWHAL_ENGINE)
    .map((p) => ({ pid: p.pid, engine: p.vars.NARWHAL_ENGINE! }));
}

/** Attestation sidecars this state directory runs: the engine each serves and that engine's launch token. */
export async function sidecarProcesses(
  stateDir: string,
): Promise<Array<{ pid: number; engine: string; launch_token: string }>> {
  return (await ownedLeaders(stateDir))
    .filter((p) => p.vars.NARWHAL_ATTESTATION_TOKEN)
    .map((p) => ({
      pid: p.pid,
      engine: p.vars.NARWHAL_ATTESTATION_ENGINE ?? "?",
      launch_token: p.vars.NARWHAL_ATTESTATION_TOKEN!,
    }));
}

/**
 * Stop everything a test's state directory owns, even if the test failed midway: SIGKILL to every
 * process group whose environment names it. Not `narwhal down`: this is cleanup, not a test of down
 * (test/e2e/down.test.ts is), and a CLI process per fleet cost 0.7 s of CPU, a tenth of a kill point's.
 */
export async function teardown(stateDir: string): Promise<void> {
  for (const p of [...(await engineProcesses(stateDir)), ...(await sidecarProcesses(stateDir))]) {
    try {
      process.kill(-p.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
}

export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** An engine's KVTransfer condition (a status row or a state record; undefined: none). */
export const kvOf = (e: { conditions: Condition[] } | undefined): Condition | undefined =>
  e?.conditions.find((c) => c.type === KV_CONDITION);
