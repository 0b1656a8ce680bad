// Public surface of src/desired: load and validate desired/, build engine
// specs, and the hashes other layers label and group engines by.

export { loadDesired, validateDesired, resolvePathVariables, type ValidationResult } from "./load.js";
export { zodIssues } from "./schema-issues.js";
export {
  buildSpecs,
  nodeSpec,
  resolveDesiredPath,
  DEFAULT_READY_SECONDS,
  DEFAULT_NATIVE_PYTHON,
  NODE_DEFAULTS,
} from "./spec.js";
export {
  canonicalJson,
  groupSignature,
  inputHash,
  inputHashMaterial,
  pythonJsonDumps,
  sha256Hex,
  INPUT_HASH_VERSION,
  type GroupSignatureInputs,
} from "./hash.js";
export { parseEnvFile } from "./env-file.js";
export { substitute } from "./substitute.js";
export { deriveEndpoints, parseEndpoint, urlHost, DEFAULT_NIXL_PORT, type Endpoint } from "./urls.js";
export {
  runRules,
  RULE_NAMES,
  derivedLaunchFields,
  flagName,
  LAUNCHER_MANAGED_ENV,
  LAUNCHER_MANAGED_FLAGS,
  REQUIRED_VARIABLES,
  SECRET_VARIABLES,
  ENV_FILE,
  FLEET_FILE,
  LAUNCH_FILE,
} from "./rules.js";
export { DEFAULT_ROLLOUT, rolloutPolicy } from "./rollout-policy.js";
export { DEFAULT_KV, kvPolicy, KvTransferSchema } from "./kv-policy.js";
export {
  RolloutSchema,
  FleetSchema,
  EngineLaunchSchema,
  LaunchRecordSchema,
  RuntimeSchema,
  jsonPath,
} from "./schemas.js";
export { MAX_FILE_BYTES, MAX_JSON_DEPTH } from "./json-safe.js";
export * from "./types.js";
