// Whether an engine enforces its API key: a plan with a key must answer 401 on
// /v1 without it. Proven by probe before capture and re-observed on every
// resync, for both backends (a container's key file can vanish, a native
// engine's environment can be wrong), so "captured" never means "open".
import type { LaunchPlan } from "./plan.js";
import { httpRequest, joinUrl } from "./http.js";

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
