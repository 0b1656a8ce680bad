// The labels narwhal puts on everything it creates (DESIGN.md "Interfaces that
// must stay stable"). Containers without these
// labels are never touched.
import type { PreparedRun } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";

export const LABEL = {
  engine: "io.narwhal.engine",
  inputHash: "io.narwhal.input-hash",
  token: "io.narwhal.launch-token",
  run: "io.narwhal.run",
  /** Scopes ownership: two controllers with different state directories never adopt each other's containers. */
  state: "io.narwhal.state",
  purpose: "io.narwhal.purpose",
} as const;

export function engineLabels(run: PreparedRun, plan: LaunchPlan, stateDir: string): Record<string, string> {
  return {
    [LABEL.engine]: run.engine,
    [LABEL.inputHash]: plan.input_hash,
    [LABEL.token]: run.launch_token,
    [LABEL.run]: run.dir,
    [LABEL.state]: stateDir,
    [LABEL.purpose]: "engine",
  };
}

/** `token` is the inspection's own (never the run's launch token): cleanup after a deadline finds the container by it. */
export function checkLabels(run: PreparedRun, stateDir: string, token: string): Record<string, string> {
  return {
    [LABEL.engine]: run.engine,
    [LABEL.token]: token,
    [LABEL.run]: run.dir,
    [LABEL.state]: stateDir,
    [LABEL.purpose]: "check",
  };
}
