// What a container must run to be a plan's engine: narwhal's entrypoint, the
// plan's serving command as Cmd and the plan's environment in Config.Env. Docker merges the image's
// ENV under the create-time Env, so the image's entries are expected too. A
// container found by its launch token is trusted only if it passes this.
import type { LaunchPlan } from "../phases/plan.js";

/** Config.Env entries a container created from `plan` is given. */
export function planEnv(plan: Pick<LaunchPlan, "environment">): string[] {
  return Object.entries(plan.environment).map(([k, v]) => `${k}=${v}`);
}

const sameArgs = (a: string[], b: string[]) => a.length === b.length && a.every((arg, i) => arg === b[i]);

function envMap(entries: string[]): Map<string, string> {
  // Later entries win, as Docker applies create-time Env over the image's ENV.
  return new Map(
    entries.map((e) => (e.includes("=") ? [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)] : [e, ""])),
  );
}

/**
 * How a container's Cmd and Env differ from the plan's (empty: they are the plan's). Variables
 * are named, never their values: an environment may carry credentials.
 */
export function containerPlanProblems(
  config: { Entrypoint?: string | string[] | null; Cmd?: string[] | null; Env?: string[] | null },
  expected: { entrypoint: string[]; imageEnv: string[] },
  plan: Pick<LaunchPlan, "command" | "environment">,
): string[] {
  const problems: string[] = [];
  const entrypoint = typeof config.Entrypoint === "string" ? [config.Entrypoint] : (config.Entrypoint ?? []);
  if (!sameArgs(entrypoint, expected.entrypoint))
    problems.push(`its entrypoint ${JSON.stringify(entrypoint)} is not narwhal's`);
  const cmd = config.Cmd ?? [];
  if (!sameArgs(cmd, plan.command))
    problems.push(`its command ${JSON.stringify(cmd)} is not the plan's ${JSON.stringify(plan.command)}`);
  const want = envMap([...expected.imageEnv, ...planEnv(plan)]);
  const actual = envMap(config.Env ?? []);
  const differ = [...new Set([...want.keys(), ...actual.keys()])].filter((k) => want.get(k) !== actual.get(k)).sort();
  if (differ.length) problems.push(`its environment differs from the plan's (and the image's) in ${differ.join(", ")}`);
  return problems;
}
