// The engine's private environment file in its run directory (seed 001: a native
// engine's is engine.env; seed 000: a container's is container.env, kept private
// because it can hold the engine API key). Runs prepared before the native name
// existed hold container.env: readers take whichever the run has, so a
// controller upgraded in place still probes, proves and adopts those engines.
import path from "node:path";
import type { EngineSpec } from "../desired/types.js";
import { parseEnvFile } from "./plan.js";
import { readOwnFile } from "../state/atomic-file.js";

export const ENGINE_ENV_FILE = "engine.env";
export const CONTAINER_ENV_FILE = "container.env";
/** Every name a run's environment file has had, the current native one first. */
export const ENV_FILES = [ENGINE_ENV_FILE, CONTAINER_ENV_FILE] as const;

/** The environment file preparation writes for a backend. */
export function envFileFor(backend: EngineSpec["backend"]): string {
  return backend === "native" ? ENGINE_ENV_FILE : CONTAINER_ENV_FILE;
}

/** The run's environment file: its name and parsed content. Rejects (ENOENT) when the run has neither name. */
export async function readRunEnv(runDir: string): Promise<{ file: string; env: Record<string, string> }> {
  for (const file of ENV_FILES) {
    try {
      return { file, env: parseEnvFile(readOwnFile(path.join(runDir, file), "utf8")) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
  }
  throw Object.assign(new Error(`${runDir} holds neither ${ENV_FILES.join(" nor ")}`), { code: "ENOENT" });
}

/** The request headers that carry the run's API key to its engine: none when its environment holds no key. */
export async function runKeyHeaders(runDir: string): Promise<Record<string, string>> {
  const key = (await readRunEnv(runDir)).env.VLLM_API_KEY;
  return key ? { Authorization: `Bearer ${key}` } : {};
}
