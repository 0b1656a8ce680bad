// Whether an engine enforces its API key: a plan with a key must answer 401 on
// /v1 without it. Proven by probe before capture and re-observed on every
// resync, for both backends (a container's key file can vanish, a native
// engine's environment can be wrong), so "captured" never means "open". On
// resync it must also still take the run's own key: an engine that refuses it
// serves with another key (a container's key file rewritten in place, mtime
// and all, and the engine restarted inside its container), which clients
// holding the fleet's key cannot use.
import type { LaunchPlan } from "./plan.js";
import { httpRequest, joinUrl } from "./http.js";
import { runKeyHeaders } from "./run-env.js";

/** The plan asks for an API key (its value lives only in the run directory). */
export const planHasKey = (plan: Pick<LaunchPlan, "secret_environment">): boolean =>
  plan.secret_environment.includes("VLLM_API_KEY");

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
  return res.status === 401 ? null : `/v1/models answered HTTP ${res.status} without the API key (401 expected)`;
}

/**
 * null when /v1/models takes the run's own key (anything but 401 or 403: what else it answers is health's
 * business), else what it answered. Throws when the run holds no key or the request gets no answer.
 */
export async function runKeyRefused(
  plan: Pick<LaunchPlan, "endpoint">,
  runDir: string,
  timeoutMs: number,
): Promise<string | null> {
  const headers = await runKeyHeaders(runDir);
  if (!headers.Authorization) throw new Error(`${runDir} holds no VLLM_API_KEY`);
  const res = await httpRequest(joinUrl(plan.endpoint, "/v1/models"), { timeoutMs, headers });
  return res.status === 401 || res.status === 403
    ? `/v1/models answered HTTP ${res.status} to the run's own API key: the engine serves with another key`
    : null;
}
