// Whether an engine enforces its API key: a plan with a key must answer 401 on
// /v1 without it. Proven by probe before capture and re-observed on every
// resync, for both backends (a container's key file can vanish, a native
// engine's environment can be wrong), so "captured" never means "open". On
// resync it must also still take the run's own key: an engine that refuses it
// serves with another key (a container's key file rewritten in place, mtime
// and all, and the engine restarted inside its container), which clients
// holding the fleet's key cannot use.
import type { LaunchPlan } from "./plan.js";
import { httpRequest, joinUrl, type HttpGet } from "./http.js";
import { runKeyHeaders } from "./run-env.js";

/** The plan asks for an API key (its value lives only in the run directory). */
export const planHasKey = (plan: Pick<LaunchPlan, "secret_environment">): boolean =>
  plan.secret_environment.includes("VLLM_API_KEY");

const notEnforced = (status: number): string | null =>
  status === 401 ? null : `/v1/models answered HTTP ${status} without the API key (401 expected)`;

const ownKeyRefused = (status: number): string | null =>
  status === 401 || status === 403
    ? `/v1/models answered HTTP ${status} to the run's own API key: the engine serves with another key`
    : null;

/**
 * null when /v1/models refuses a request without the key (401), else what it answered instead.
 * A request that gets no answer is health's business, not a key problem: it throws.
 */
export async function keyNotEnforced(
  plan: Pick<LaunchPlan, "endpoint">,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<string | null> {
  const res = await httpRequest(joinUrl(plan.endpoint, "/v1/models"), { timeoutMs, ...(signal ? { signal } : {}) });
  return notEnforced(res.status);
}

/**
 * The GETs of a resync's key checks: /v1/models without the key, then with the run's own key (not
 * made when the run holds no key). Answered in this order, keyFindings reads them.
 */
export async function keyChecks(runDir: string): Promise<HttpGet[]> {
  const headers = await runKeyHeaders(runDir).catch(() => ({}) as Record<string, string>);
  return [{ path: "/v1/models" }, ...(headers.Authorization ? [{ path: "/v1/models", headers }] : [])];
}

/**
 * What the answers to keyChecks' GETs find wrong with a running engine's key: /v1/models answers
 * without the key (401 expected), or refuses the run's own key (401 or 403: it serves with another).
 * A GET without an answer (undefined) finds nothing: that is health's business.
 */
export function keyFindings([open, withKey]: Array<{ status: number } | undefined>): string[] {
  return [open ? notEnforced(open.status) : null, withKey ? ownKeyRefused(withKey.status) : null].filter(
    (f): f is string => f !== null,
  );
}
