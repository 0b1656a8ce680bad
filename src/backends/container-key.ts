// A container engine's API key: a file copied into the container before it
// starts (never Config.Env, never the command line), read by a wrapper that
// fails closed. Every path that starts a container installs it; observation
// compares the file with the run's key (mode and digest).
import fs from "node:fs/promises";
import path from "node:path";
import { sha256Hex } from "../desired/hash.js";
import { PhaseError } from "../errors.js";
import type { LaunchPlan } from "../phases/plan.js";
import { API_KEY_FILE } from "../phases/prepare.js";
import type { PreparedRun } from "../phases/types.js";
import { planHasKey } from "../phases/key-enforcement.js";
import type { DockerCalls } from "./docker-calls.js";
import { firstTarFile, tarArchive } from "./tar.js";
import { readJsonIfExists, writeFileAtomic } from "../state/atomic-file.js";

export const SECRET_PATH = "/run/secrets/narwhal-api-key";
export const SECRET_MODE = 0o400;
/** Exit status of a wrapper that refused to serve (EX_CONFIG): distinct from vLLM's own failures. */
export const NO_KEY_EXIT = 78;

// With a key: no readable, non-empty key file means no serve — the engine exits with a line that
// names the file, so a lost engine's reason (its last log lines) names the cause.
const KEY_WRAPPER =
  `if [ ! -r ${SECRET_PATH} ] || [ ! -s ${SECRET_PATH} ]; then ` +
  `echo "narwhal-engine: refusing to serve: API key file ${SECRET_PATH} is missing or unreadable" >&2; exit ${NO_KEY_EXIT}; fi; ` +
  `VLLM_API_KEY="$(cat ${SECRET_PATH})"; export VLLM_API_KEY; exec "$@"`;
const PLAIN_WRAPPER = `exec "$@"`;

/** The container's entrypoint: the fail-closed key wrapper when the plan has a key. */
export function entrypoint(plan: LaunchPlan): string[] {
  return ["/bin/sh", "-c", planHasKey(plan) ? KEY_WRAPPER : PLAIN_WRAPPER, "narwhal-engine"];
}

/** The run's key (null when the plan has none); a plan with a key whose run lost the file cannot start. */
export async function runKey(run: Pick<PreparedRun, "engine" | "dir">, plan: LaunchPlan): Promise<string | null> {
  if (!planHasKey(plan)) return null;
  const file = path.join(run.dir, API_KEY_FILE);
  const key = (await fs.readFile(file, "utf8").catch(() => null))?.trim();
  if (key) return key;
  throw new PhaseError(run.engine, "start", `the plan has an API key but ${file} is missing or empty`, {
    retryable: true,
    input: file,
    fix: "Nothing starts without its key; narwhal prepares a fresh run on retry.",
  });
}

/** Copy the key in (a created or stopped container), then prove it landed as recorded (and record its stat). */
export async function installKey(
  docker: DockerCalls,
  id: string,
  run: Pick<PreparedRun, "engine" | "dir">,
  key: string,
  signal?: AbortSignal,
): Promise<void> {
  const rel = SECRET_PATH.slice(1);
  await docker.putArchive(
    id,
    tarArchive([
      { name: "run/", mode: 0o755 },
      { name: "run/secrets/", mode: 0o700 },
      { name: rel, data: key, mode: SECRET_MODE },
    ]),
    "/",
    signal,
  );
  const problems = await provenKeyProblems(docker, id, key, run.dir, signal);
  if (problems.length) {
    throw new PhaseError(
      run.engine,
      "start",
      `container ${id.slice(0, 12)}: ${problems.join("; ")} right after it was copied in`,
      {
        retryable: true,
        input: SECRET_PATH,
        fix: "Check the image's /run (a read-only or special filesystem there); narwhal retries with a fresh container.",
      },
    );
  }
}

/** What about the container's key file differs from the run's key (empty: intact). */
export async function keyFileProblems(
  docker: DockerCalls,
  id: string,
  key: string,
  signal?: AbortSignal,
): Promise<string[]> {
  const tar = await docker.getArchive(id, SECRET_PATH, 64 * 1024, signal);
  const file = tar && firstTarFile(tar);
  if (!file) return [`API key file ${SECRET_PATH} is missing`];
  const problems: string[] = [];
  if (file.mode !== SECRET_MODE)
    problems.push(`API key file ${SECRET_PATH} has mode 0${file.mode.toString(8)}, not 0${SECRET_MODE.toString(8)}`);
  const digest = sha256Hex(file.data);
  const want = sha256Hex(key);
  if (digest !== want)
    problems.push(
      `API key file ${SECRET_PATH} has digest sha256:${digest.slice(0, 12)}…, not the run's sha256:${want.slice(0, 12)}…`,
    );
  return problems;
}

/**
 * The run's record of its container's key file as last proven (mode and digest read back): the
 * daemon's stat of the file then (name, size, mode, mtime to the nanosecond, link target).
 */
export const KEY_STAT_FILE = "container-key-stat.json";

interface KeyStatRecord {
  container_id: string;
  stat: Record<string, unknown>;
}

const sameStat = (a: Record<string, unknown>, b: Record<string, unknown>) =>
  JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

/**
 * keyFileProblems (the full read-back), and when there are none the daemon's stat of the file now
 * recorded in the run, for observations to compare with.
 */
export async function provenKeyProblems(
  docker: DockerCalls,
  id: string,
  key: string,
  runDir: string,
  signal?: AbortSignal,
): Promise<string[]> {
  const problems = await keyFileProblems(docker, id, key, signal);
  if (problems.length) return problems;
  const stat = await docker.statPath(id, SECRET_PATH, signal);
  if (stat) await writeFileAtomic(path.join(runDir, KEY_STAT_FILE), JSON.stringify({ container_id: id, stat }) + "\n");
  return [];
}

/**
 * keyFileProblems for an observation: when the daemon's stat of the file equals the one recorded
 * after its last proof (same container), the file was not rewritten, chmod-ed or replaced since
 * (any write moves its nanosecond mtime), and no download is needed: a download makes the daemon
 * spawn a tar helper, per engine and per observation. Anything else, or no record, is the full
 * read-back, which names what differs.
 */
export async function observedKeyProblems(
  docker: DockerCalls,
  id: string,
  key: string,
  runDir: string,
  signal?: AbortSignal,
): Promise<string[]> {
  const recorded = await readJsonIfExists<KeyStatRecord>(path.join(runDir, KEY_STAT_FILE)).catch(() => null);
  if (recorded?.container_id === id && recorded.stat) {
    const now = await docker.statPath(id, SECRET_PATH, signal);
    if (now && sameStat(now, recorded.stat)) return [];
  }
  return keyFileProblems(docker, id, key, signal);
}
