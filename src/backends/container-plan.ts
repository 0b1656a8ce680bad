// What a container must run to be a plan's engine: the plan's serving command
// as Cmd and the plan's environment in Config.Env. Docker merges the image's
// ENV under the create-time Env, so the image's entries are expected too. A
// container found by its launch token is trusted only if it passes this.
import type { LaunchPlan } from "../phases/plan.js";

/** Config.Env entries a container created from `plan` is given. */
export function planEnv(plan: Pick<LaunchPlan, "environment">): string[] {
  return Object.entries(plan.environment).map(([k, v]) => `${k}=${v}`);
}

function envMap(entries: string[]): Map<string, string> {
  // Later entries win, as Docker applies create-time Env over the image's ENV.
  return new Map(entries.map((e) => (e.includes("=") ? [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)] : [e, ""])));
}

/**
 * How a container's Cmd and Env differ from the plan's (empty: they are the plan's). Variables
 * are named, never their values: an environment may carry credentials.
 */
export function containerPlanProblems(config: { Cmd?: string[] | null; Env?: string[] | null }, imageEnv: string[], plan: Pick<LaunchPlan, "command" | "environment">): string[] {
  const problems: string[] = [];
  const cmd = config.Cmd ?? [];
  if (cmd.length !== plan.command.length || cmd.some((arg, i) => arg !== plan.command[i])) {
    problems.push(`its command ${JSON.stringify(cmd)} is not the plan's ${JSON.stringify(plan.command)}`);
  }
  const expected = envMap([...imageEnv, ...planEnv(plan)]);
  const actual = envMap(config.Env ?? []);
  const differ = [...new Set([...expected.keys(), ...actual.keys()])].filter((k) => expected.get(k) !== actual.get(k)).sort();
  if (differ.length) problems.push(`its environment differs from the plan's (and the image's) in ${differ.join(", ")}`);
  return problems;
}
