// Each attempt the container backend makes (an engine start, a runtime check)
// labels what it creates with its own token, so that whatever it created, also
// a container whose create answer never arrived, is found and removed again.
import type { DockerCalls } from "./docker-calls.js";
import type { Failpoint } from "../failpoints.js";
import { LABEL, type FleetScope } from "./container-labels.js";

/** What an attempt works with: one node's Docker client and the backend's settings. */
export interface AttemptContext {
  docker: DockerCalls;
  stateDir: string;
  /** The fleet the attempt is for (undefined: not learned; see container-labels.ts). */
  fleet: FleetScope | undefined;
  /** Most bytes of a container's log read into memory or kept as engine.log. */
  logCapBytes: number;
  failpoint: Failpoint;
}

export function byToken(
  docker: DockerCalls,
  stateDir: string,
  token: string,
  signal?: AbortSignal,
  purpose: "engine" | "check" = "engine",
) {
  return docker.list([`${LABEL.token}=${token}`, `${LABEL.purpose}=${purpose}`, `${LABEL.state}=${stateDir}`], signal);
}

/** Remove whatever one attempt created, found by its token, under fresh deadlines (the attempt's own may be spent). */
export async function removeAttempt(
  docker: DockerCalls,
  stateDir: string,
  token: string,
  purpose: "engine" | "check",
  known?: string,
): Promise<void> {
  const found = await byToken(docker, stateDir, token, undefined, purpose).catch(() => []);
  for (const id of new Set([...found.map((c) => c.id), ...(known ? [known] : [])]))
    await docker.remove(id).catch(() => undefined);
}
