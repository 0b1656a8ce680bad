// Rules over deployment.env alone: required variables and value formats.
// These run even when a JSON file is broken, so an operator sees every
// problem of the environment file in the same report.

import type { ValidationIssue } from "../errors.js";
import { closestName } from "./did-you-mean.js";
import { ENGINE_ARGS_VARIABLE, ENGINE_ENV_VARIABLE } from "./launch-extras.js";
import { nodeVar, parsePort } from "./urls.js";

export const ENV_FILE = "deployment.env";

/** Variables every desired state needs (seed 000 Gate C, seed 003 §14). */
export const REQUIRED_VARIABLES = [
  "NARWHAL_MODEL_DIR",
  "NARWHAL_MODEL_CONFIG_SHA256",
  "NARWHAL_ENGINE_MODEL_NAME",
  "NARWHAL_FABRIC_INTERFACE",
] as const;

/** Variables whose values are secrets: excluded from DesiredState.variables, never substituted. */
export const SECRET_VARIABLES: ReadonlySet<string> = new Set(["NARWHAL_ENGINE_API_KEY"]);

/**
 * Every fleet-wide deployment.env variable narwhal reads, and those the seed's
 * tools read from the same file (image, launcher, fabric budget tool), so a
 * misspelling of one can be named. Per-node ones are NODE_VARIABLE_SUFFIXES.
 */
export const KNOWN_VARIABLES: readonly string[] = [
  ...REQUIRED_VARIABLES,
  ...SECRET_VARIABLES,
  "NARWHAL_MODEL_REVISION",
  "NARWHAL_MODEL_PATH",
  "NARWHAL_MODEL_TREE_SHA256",
  "NARWHAL_NATIVE_PYTHON",
  "NARWHAL_NATIVE_PYTHONPATH",
  "NARWHAL_READY_SECONDS",
  ENGINE_ARGS_VARIABLE,
  ENGINE_ENV_VARIABLE,
  "NARWHAL_ENGINE_PORT",
  "NARWHAL_ATTEST_PORT",
  "NARWHAL_NIXL_PORT",
  "NARWHAL_TRANSFER_PORTS",
  "NARWHAL_ENGINE_IMAGE",
  "NARWHAL_ENGINE_LAUNCHER",
  "NARWHAL_ENGINE_LAUNCHER_SHA256",
  "NARWHAL_ENGINE_LAUNCH_CONFIG",
  "NARWHAL_LAUNCH_CONFIG",
  "NARWHAL_FABRIC_BUDGET_TOOL",
  "NARWHAL_FABRIC_BUDGET_SHA256",
  "NARWHAL_FLEET",
  "NARWHAL_DESIRED",
  "NARWHAL_STATE",
  "NARWHAL_RUN_DIR",
];
/** NARWHAL_NODE_<k>_<suffix> variables (seed 003 §14 and the per-node port overrides). */
export const NODE_VARIABLE_SUFFIXES = [
  "IP",
  "URL",
  "ATTESTATION_URL",
  "ENGINE_PORT",
  "ATTEST_PORT",
  "NIXL_PORT",
  "TRANSFER_PORTS",
] as const;
const NODE_VARIABLE = /^NARWHAL_NODE_([1-9][0-9]{0,3})_/;

/** How the JSON files use variables, for the misspelling rule. */
export interface VariableUse {
  /** Names some `${NAME}` uses; undefined when a JSON file could not be read, so any name might be used. */
  referenced?: ReadonlySet<string>;
  /** Engine indices k the files name. */
  indices: ReadonlySet<number>;
}

/** The known variable `name` most likely misspells (per-node names only against their own node k). */
function misspeltVariable(name: string, indices: ReadonlySet<number>): string | undefined {
  const own = NODE_VARIABLE.exec(name);
  if (own && (NODE_VARIABLE_SUFFIXES as readonly string[]).includes(name.slice(own[0].length))) return undefined; // the common case, at once on a 1000-engine tree
  if (own)
    return closestName(
      name,
      NODE_VARIABLE_SUFFIXES.map((s) => nodeVar(Number(own[1]), s)),
    );
  // A misspelt per-node name still carries its node's k ("NARWHAL_NOD_2_IP"): compare with the nodes its digits name.
  const ks = (name.match(/[0-9]+/g) ?? []).map(Number).filter((k) => indices.has(k));
  return closestName(name, [
    ...KNOWN_VARIABLES,
    ...ks.flatMap((k) => NODE_VARIABLE_SUFFIXES.map((s) => nodeVar(k, s))),
  ]);
}

const PORT_VARIABLE = /^NARWHAL_(?:NODE_[1-9][0-9]*_)?(?:ENGINE|ATTEST|NIXL)_PORT$/;
const TRANSFER_PORTS_VARIABLE = /^NARWHAL_(?:NODE_[1-9][0-9]*_)?TRANSFER_PORTS$/;

export type VariableRule = {
  name: string;
  check(vars: Readonly<Record<string, string>>, use: VariableUse): ValidationIssue[];
};

const at = (name: string, message: string, rule: string): ValidationIssue => ({
  file: ENV_FILE,
  path: `$.${name}`,
  message,
  rule,
});

/** An optional pin: unset is no pin; set (even empty) it must be a sha256 (`what` says which one to write). */
function optionalSha256Pin(name: string, variable: string, what: string): VariableRule {
  return {
    name,
    check: (vars) => {
      const v = vars[variable];
      if (v === undefined || /^[0-9a-f]{64}$/.test(v)) return [];
      return [
        at(
          variable,
          `"${v}" is not a sha256: write the 64 lower-case hex digits of ${what}, or leave the variable out`,
          name,
        ),
      ];
    },
  };
}

export const variableRules: VariableRule[] = [
  {
    // A misspelt variable is otherwise silently ignored: NARWHAL_READY_SECOND=600
    // would leave readiness at its 180 s default. Names that no known one is
    // close to, or that a ${NAME} uses, are the operator's own and stay allowed.
    name: "variable-names",
    check: (vars, { referenced, indices }) => {
      if (!referenced) return [];
      const known = new Set<string>(KNOWN_VARIABLES);
      return Object.keys(vars).flatMap((name) => {
        if (known.has(name) || referenced.has(name)) return [];
        const meant = misspeltVariable(name, indices);
        return meant === undefined
          ? []
          : [
              at(
                name,
                `${name} is not a variable narwhal reads and no "\${${name}}" uses it; did you mean ${meant}? Rename it`,
                "variable-names",
              ),
            ];
      });
    },
  },
  {
    name: "required-variables",
    check: (vars) =>
      REQUIRED_VARIABLES.filter((v) => !Object.hasOwn(vars, v) || vars[v] === "").map((v) =>
        at(v, `${v} is required; set it in deployment.env`, "required-variables"),
      ),
  },
  {
    name: "model-config-sha256",
    check: (vars) => {
      const v = vars["NARWHAL_MODEL_CONFIG_SHA256"];
      if (v === undefined || v === "" || /^[0-9a-f]{64}$/.test(v)) return [];
      return [
        at(
          "NARWHAL_MODEL_CONFIG_SHA256",
          `"${v}" is not a sha256: write the 64 lower-case hex digits sha256sum prints for $NARWHAL_MODEL_DIR/config.json`,
          "model-config-sha256",
        ),
      ];
    },
  },
  optionalSha256Pin("model-tree-sha256", "NARWHAL_MODEL_TREE_SHA256", "tree_sha256 in a run's model-manifest.json"),
  optionalSha256Pin("launcher-sha256", "NARWHAL_ENGINE_LAUNCHER_SHA256", "the launcher digest `narwhal plan` shows"),
  {
    name: "port-variables",
    check: (vars) =>
      Object.keys(vars).flatMap((name) => {
        const value = vars[name] as string;
        if (PORT_VARIABLE.test(name) && parsePort(value) === undefined) {
          return [at(name, `${name}="${value}" must be an integer port 1..65535`, "port-variables")];
        }
        if (TRANSFER_PORTS_VARIABLE.test(name)) {
          const bad = value
            .split(",")
            .map((s) => s.trim())
            .filter((s) => s !== "" && parsePort(s) === undefined);
          if (bad.length > 0)
            return [
              at(name, `${name} lists ${bad.join(", ")}: write comma-separated ports 1..65535`, "port-variables"),
            ];
        }
        return [];
      }),
  },
  {
    name: "ready-seconds",
    check: (vars) => {
      const v = vars["NARWHAL_READY_SECONDS"];
      if (v === undefined || (/^[0-9]+$/.test(v) && Number(v) > 0 && Number(v) <= 86400)) return [];
      return [
        at(
          "NARWHAL_READY_SECONDS",
          `"${v}" must be a positive whole number of seconds (at most 86400)`,
          "ready-seconds",
        ),
      ];
    },
  },
  {
    // deployment.env values reach container.env (one KEY=VALUE per line) and the
    // seed's shell tools, which read a "\n" escape literally; a line break from
    // a double-quoted "\n" would mean one thing here and another there.
    name: "single-line-values",
    check: (vars) =>
      Object.keys(vars)
        .filter((name) => /[\r\n]/.test(vars[name] as string))
        .map((name) =>
          at(
            name,
            `${name} contains a line break (a "\\n" escape in double quotes); values must be single-line, so write it on one line without "\\n"`,
            "single-line-values",
          ),
        ),
  },
  {
    name: "non-empty-values",
    check: (vars) =>
      ["NARWHAL_MODEL_REVISION", "NARWHAL_MODEL_PATH", "NARWHAL_NATIVE_PYTHON", "NARWHAL_ENGINE_API_KEY"]
        .filter((v) => vars[v] === "")
        .map((v) => at(v, `${v} is set but empty; remove the line or give it a value`, "non-empty-values")),
  },
];
