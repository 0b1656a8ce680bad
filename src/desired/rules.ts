// The cross-record rules of DESIGN principle 5, run together so the operator
// sees every problem at once. Rules that need a JSON file run over its records
// that matched their schema (records-for-rules.ts); variable rules always run.

import type { ValidationIssue } from "../errors.js";
import { pairEngines } from "./engine-pairs.js";
import type { NodeFiles } from "./node-files.js";
import type { FleetForRules, SchemaFailures } from "./records-for-rules.js";
import { fleetRules } from "./rules-fleet.js";
import { nixlCompatRules } from "./rules-nixl-compat.js";
import { recordRules } from "./rules-record.js";
import { launchExtraRules } from "./rules-launch-extras.js";
import { variableRules } from "./rules-variables.js";
import type { EngineLaunchFile } from "./schemas.js";

export {
  FLEET_FILE,
  LAUNCH_FILE,
  LAUNCHER_MANAGED_ENV,
  LAUNCHER_MANAGED_FLAGS,
  derivedLaunchFields,
  flagName,
} from "./rules-record.js";
export { ENV_FILE, REQUIRED_VARIABLES, SECRET_VARIABLES } from "./rules-variables.js";

export interface RuleInput {
  vars: Readonly<Record<string, string>>;
  /** Present when fleet.json parsed to an object with engines and nodes lists; records that failed their schema are holes. */
  fleet?: FleetForRules;
  /** Present when engine-launch.json parsed to an object of records; only the records that passed their schema. */
  launch?: EngineLaunchFile;
  /** Records that failed their schema (reported there): never reported as missing by a rule. */
  failures?: SchemaFailures;
  /** Variables some `${NAME}` in the JSON files uses; undefined when a file could not be read, so that use is unknown. */
  referenced?: ReadonlySet<string>;
  /** Engine indices k the files name (fleet iids and launch keys). */
  indices?: ReadonlySet<number>;
  /** The nodes' ssh files as found on disk (load.ts looks; the rules judge). */
  nodeFiles?: NodeFiles;
}

/** Names of every rule, for documentation and tests. */
export const RULE_NAMES: readonly string[] = [
  ...variableRules.map((r) => r.name),
  ...recordRules.map((r) => r.name),
  ...launchExtraRules.map((r) => r.name),
  ...fleetRules.map((r) => r.name),
  ...nixlCompatRules.map((r) => r.name),
];

/** Run every applicable rule; never stops at the first issue. */
export function runRules(input: RuleInput): ValidationIssue[] {
  const { vars, fleet, launch } = input;
  // Paired once for every rule that joins the two files: each used to pair the same (up to 1000) engines.
  const pairs = fleet && launch ? pairEngines(fleet, launch) : [];
  const files = input.nodeFiles ? { nodeFiles: input.nodeFiles } : {};
  const failures = input.failures ?? {
    fleetIids: new Set(),
    launchNames: new Set(),
    fleetEnginesIncomplete: false,
    launchRecordsIncomplete: false,
    nodesIncomplete: false,
  };
  const use = {
    ...(input.referenced ? { referenced: input.referenced } : {}),
    indices: input.indices ?? new Set<number>(),
  };
  const issues: ValidationIssue[] = variableRules.flatMap((r) => r.check(vars, use));
  if (launch) {
    for (const rule of [...recordRules, ...launchExtraRules]) {
      if (rule.needs === "launch") issues.push(...rule.check({ vars, launch }));
      else if (fleet) issues.push(...rule.check({ vars, launch, fleet, failures, pairs }));
    }
  }
  if (fleet) {
    for (const rule of [...fleetRules, ...nixlCompatRules]) {
      if (rule.needs === "fleet") issues.push(...rule.check({ vars, fleet, failures, ...files }));
      else if (launch) issues.push(...rule.check({ vars, launch, fleet, failures, pairs, ...files }));
    }
  }
  return issues;
}
