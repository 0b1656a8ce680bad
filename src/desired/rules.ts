// The cross-record rules of DESIGN principle 5, run together so the operator
// sees every problem at once. Rules that need a JSON file only run when that
// file parsed and matched its schema; variable rules always run.

import type { ValidationIssue } from "../errors.js";
import { fleetRules } from "./rules-fleet.js";
import { recordRules } from "./rules-record.js";
import { launchExtraRules } from "./rules-launch-extras.js";
import { variableRules } from "./rules-variables.js";
import type { EngineLaunchFile, FleetFile } from "./schemas.js";

export { FLEET_FILE, LAUNCH_FILE, LAUNCHER_MANAGED_ENV, LAUNCHER_MANAGED_FLAGS, derivedLaunchFields, flagName } from "./rules-record.js";
export { ENV_FILE, REQUIRED_VARIABLES, SECRET_VARIABLES } from "./rules-variables.js";

export interface RuleInput {
  vars: Readonly<Record<string, string>>;
  /** Present when fleet.json parsed, substituted and matched its schema. */
  fleet?: FleetFile;
  /** Present when engine-launch.json parsed, substituted and matched its schema. */
  launch?: EngineLaunchFile;
}

/** Names of every rule, for documentation and tests. */
export const RULE_NAMES: readonly string[] = [
  ...variableRules.map((r) => r.name),
  ...recordRules.map((r) => r.name),
  ...launchExtraRules.map((r) => r.name),
  ...fleetRules.map((r) => r.name),
];

/** Run every applicable rule; never stops at the first issue. */
export function runRules(input: RuleInput): ValidationIssue[] {
  const { vars, fleet, launch } = input;
  const issues: ValidationIssue[] = variableRules.flatMap((r) => r.check(vars));
  if (launch) {
    for (const rule of [...recordRules, ...launchExtraRules]) {
      if (rule.needs === "launch") issues.push(...rule.check({ vars, launch }));
      else if (fleet) issues.push(...rule.check({ vars, launch, fleet }));
    }
    if (fleet) for (const rule of fleetRules) issues.push(...rule.check({ vars, launch, fleet }));
  }
  return issues;
}
