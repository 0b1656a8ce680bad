// How a failed Docker Engine API call is classified: past its deadline
// (retried, naming the variable that sets it), the daemon not there to answer
// (outwaited), a transient answer (retried) or a request of ours the daemon
// refuses (terminal). The call wrappers are docker-calls.ts.
import { NarwhalError, type FailureClass } from "../errors.js";

export class DockerCallError extends NarwhalError {
  constructor(
    readonly call: string,
    message: string,
    readonly statusCode: number | undefined,
    /** true/false: retried / terminal; or a failure class ("outwait" for an unreachable daemon). */
    retryable: boolean | FailureClass,
    readonly timedOut = false,
    /** For a deadline: the variable that sets it (the input an operator changes). */
    deadlineVar?: string,
  ) {
    super(message, {
      ...(typeof retryable === "string" ? { failure: retryable } : { retryable }),
      input: deadlineVar ?? `docker ${call}`,
      ...(retryable === "outwait"
        ? {
            fix: "Start the Docker daemon on the engine host, or correct docker_host / DOCKER_HOST; narwhal re-checks until it answers.",
          }
        : {}),
    });
  }
}

/**
 * The daemon is not there to answer (socket gone or refusing, connection cut) or says it is
 * restarting: a condition to outwait, however long it lasts, not an attempt to use up. A
 * daemon that answers slowly (a deadline) or with an error of its own is retried instead.
 */
export function daemonUnavailable(err: { statusCode?: number; message?: string; code?: string }): boolean {
  if (
    err.code !== undefined &&
    ["ECONNREFUSED", "ENOENT", "ECONNRESET", "EPIPE", "EHOSTUNREACH", "ENETUNREACH"].includes(err.code)
  )
    return true;
  if (err.statusCode === 503) return true;
  return (
    err.statusCode !== undefined &&
    err.statusCode >= 500 &&
    /restarting|shutting down|daemon is not running/i.test(err.message ?? "")
  );
}

/** A call past its deadline: retried; the fix is the deadline's variable. */
export function deadlineExceeded(what: string, variable: string, ms: number, endpoint: string): DockerCallError {
  return new DockerCallError(
    what,
    `docker ${what} exceeded its deadline of ${ms} ms (${variable}) on ${endpoint}`,
    undefined,
    true,
    true,
    variable,
  );
}

/** A call the daemon failed or could not be reached for, classified by daemonUnavailable and its status. */
export function callFailure(what: string, err: unknown, endpoint: string): DockerCallError {
  const e = err as { statusCode?: number; message?: string; code?: string };
  // 409 (a name still held by a container being removed) clears by itself; other 4xx are ours to fix.
  const transient = e.statusCode === undefined || e.statusCode >= 500 || e.statusCode === 409;
  const failure = daemonUnavailable(e) ? "outwait" : transient ? "retry" : "terminal";
  return new DockerCallError(
    what,
    `docker ${what} failed on ${endpoint}: ${e.message ?? String(err)}`,
    e.statusCode,
    failure,
  );
}
