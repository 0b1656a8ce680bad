// Loads desired/: deployment.env, fleet.json, engine-launch.json.
//   read (caps, BOM, UTF-8) → parse (depth, forbidden keys) → variables
//   (desired-relative paths resolved, URLs derived) → ${VAR} substitution →
//   zod schemas → cross-record rules (over every record that passed its
//   schema, so one run reports everything) → engine specs.
// Substitution runs *before* the schemas: a field such as
// "transport": "${NARWHAL_TRANSPORT}" can only be judged once substituted, and
// every issue still names the file and JSON path the operator wrote.
// Nothing here reads process.env: deployment.env is the only variable source.

import { isAbsolute, join, resolve } from "node:path";
import type { z } from "zod";
import { DesiredStateError, type ValidationIssue } from "../errors.js";
import { indexOfEngineName, indexOfIid } from "./engine-pairs.js";
import { parseEnvFile } from "./env-file.js";
import { parseJsonSafely, readTextFile } from "./json-safe.js";
import { engineCount, oversized, perEngineCap, type SizeCap } from "./size-caps.js";
import { inspectNodeFiles, sameNodeFiles, type NodeFileFacts } from "./node-files.js";
import { recordsForRules } from "./records-for-rules.js";
import { ENV_FILE, FLEET_FILE, LAUNCH_FILE, runRules, SECRET_VARIABLES } from "./rules.js";
import { zodIssues } from "./schema-issues.js";
import { EngineLaunchSchema, FleetSchema, type EngineLaunchFile, type FleetFile } from "./schemas.js";
import { buildSpecs, resolveDesiredPath } from "./spec.js";
import { rolloutPolicy } from "./rollout-policy.js";
import { IMAGE_RULE } from "./rules-image.js";
import { imageTagsToResolve, type ImageTag } from "./image-tags.js";
import { kvPolicy } from "./kv-policy.js";
import { parseLaunchDocument } from "./launch-parse.js";
import { substitute } from "./substitute.js";
import type { DesiredState } from "./types.js";
import { deriveEndpoints } from "./urls.js";
import { desiredKey } from "./desired-key.js";
import { runningLauncher } from "../app.js";
import type { LauncherIdentity } from "../launcher.js";

/** Variables holding host paths; relative values resolve against the desired directory. */
export const PATH_VARIABLES = ["NARWHAL_MODEL_DIR", "NARWHAL_MODEL_PATH"] as const;
/** Like PATH_VARIABLES but a ":"-separated list (PYTHONPATH syntax). */
export const PATH_LIST_VARIABLES = ["NARWHAL_NATIVE_PYTHONPATH"] as const;
/** A command: bare names stay PATH lookups, relative paths with "/" resolve. */
export const COMMAND_VARIABLES = ["NARWHAL_NATIVE_PYTHON"] as const;

export interface ValidationResult {
  state?: DesiredState;
  issues: ValidationIssue[];
  /** Engines whose image is a tag (the image-identity issues), for the CLI to resolve on their nodes. */
  imageTags?: ImageTag[];
}

/** Load and validate; throws DesiredStateError carrying every issue. */
/**
 * Inputs that take the place of parts of desired/ for one engine's manual
 * preparation (`narwhal engine prepare`): a role shell's launch record
 * (NARWHAL_ENGINE_LAUNCH_CONFIG) and its startup environment.
 */
export interface DesiredOverrides {
  /** Variables that take precedence over deployment.env's. */
  variables?: Readonly<Record<string, string>>;
  /** Edits the parsed engine-launch.json document before substitution and validation. */
  editLaunch?: (document: unknown) => unknown;
  /** The launcher the specs are prepared by (default: this narwhal, src/app.ts runningLauncher). */
  launcher?: LauncherIdentity;
  /** The last valid validation the controller recorded (state/desired-summary.json): see RecordedValidation. */
  recorded?: RecordedValidation | null;
}

/**
 * A valid validation as recorded: the key of what it read (desired-key.ts: the texts, their directory, the
 * launcher, whose digest names narwhal's version), the ssh files its nodes named as it found them, and each
 * engine's input hash. The rules and the input hashes are functions of exactly those, so a validation that
 * reads the same (the same key, every node file found alike) does not run the rules again and takes the
 * hashes (39 and 47 us an engine of a no-op's validation); it still parses, substitutes and builds every spec.
 * `narwhal status` trusts the same record to skip validating at all (state/desired-summary.ts).
 */
export interface RecordedValidation {
  key: string;
  node_files: ReadonlyArray<readonly [string, NodeFileFacts]>;
  input_hashes: ReadonlyMap<string, string>;
}

export async function loadDesired(dir: string, overrides: DesiredOverrides = {}): Promise<DesiredState> {
  const result = await validateDesired(dir, overrides);
  if (!result.state) throw new DesiredStateError(result.issues);
  return result.state;
}

/** Load and validate without throwing on invalid input (for `narwhal validate`). */
export async function validateDesired(dir: string, overrides: DesiredOverrides = {}): Promise<ValidationResult> {
  const absDir = resolve(dir);
  const read = (file: string, cap?: SizeCap) => readTextFile(join(absDir, file), file, absDir, cap);
  // engine-launch.json's bound follows the engine count fleet.json lists (size-caps.ts), so it is read second.
  const [envText, fleetText] = await Promise.all([read(ENV_FILE), read(FLEET_FILE, perEngineCap(undefined))]);
  const fleetParsed = fleetText.text === undefined ? undefined : parseJsonSafely(fleetText.text, FLEET_FILE);
  const engines = engineCount(fleetParsed?.value);
  const fleetRaw = withinCap(fleetParsed, fleetText.text, FLEET_FILE, perEngineCap(engines));
  const launchText = await read(LAUNCH_FILE, perEngineCap(engines));
  const issues: ValidationIssue[] = [...envText.issues, ...fleetText.issues, ...launchText.issues];

  const env = parseEnvFile(envText.text ?? "", ENV_FILE);
  issues.push(...env.issues);
  const vars = resolvePathVariables(
    absDir,
    Object.assign(Object.create(null) as Record<string, string>, env.variables, overrides.variables),
  );

  const launchParsed = launchText.text === undefined ? undefined : parseJsonSafely(launchText.text, LAUNCH_FILE);
  const launchRaw =
    launchParsed && overrides.editLaunch && launchParsed.value !== undefined
      ? { ...launchParsed, value: overrides.editLaunch(launchParsed.value) }
      : launchParsed;
  issues.push(...(fleetRaw?.issues ?? []), ...(launchRaw?.issues ?? []));
  // Unread (missing, oversized, not text), deployment.env defines nothing: every "required" or
  // "not defined" issue after this would be its consequence, not a cause.
  if (envText.issues.length > 0) return { issues };

  const indices = engineIndices(fleetRaw?.value, launchRaw?.value);
  const { derived, unavailable } = deriveEndpoints(vars, indices);
  const allVars: Record<string, string> = Object.assign(Object.create(null) as Record<string, string>, vars, derived);
  const failed = new Map<string, Set<string>>();
  // Which variables a ${NAME} uses is only known when both JSON files could be read.
  const referenced: Set<string> | undefined =
    fleetRaw?.value !== undefined && launchRaw?.value !== undefined ? new Set() : undefined;

  const check = <S extends z.ZodType>(
    raw: unknown,
    file: string,
    schema: S,
    parse: (doc: unknown) => z.ZodSafeParseResult<z.output<S>> = (doc) => schema.safeParse(doc),
  ): { doc: unknown; parsed?: z.output<S> } | undefined => {
    if (raw === undefined) return undefined;
    const sub = substitute(raw, allVars, {
      file,
      secretNames: SECRET_VARIABLES,
      explainUndefined: (name) => unavailable.get(name),
    });
    issues.push(...sub.issues);
    failed.set(file, sub.failedPaths);
    for (const name of sub.referenced) referenced?.add(name);
    const parsed = parse(sub.value);
    // Rules still run on a document with unresolved variables; their issues
    // under the failed paths are dropped as consequences, not causes.
    if (parsed.success) return { doc: sub.value, parsed: parsed.data };
    issues.push(...zodIssues(file, parsed.error, schema, sub.value).filter((i) => !underFailed(i, failed)));
    return { doc: sub.value };
  };
  const fleetChecked = check(fleetRaw?.value, FLEET_FILE, FleetSchema);
  // An edited document may hold what JSON cannot (undefined): only JSON data is parsed record by record.
  const launchChecked = check(
    launchRaw?.value,
    LAUNCH_FILE,
    EngineLaunchSchema,
    overrides.editLaunch ? undefined : parseLaunchDocument,
  );
  const fleet = fleetChecked?.parsed as FleetFile | undefined;
  const launch = launchChecked?.parsed as EngineLaunchFile | undefined;

  const records = recordsForRules(fleetChecked?.doc, fleet, launchChecked?.doc, launch);
  const nodeFiles = await inspectNodeFiles(absDir, records.fleet?.nodes ?? []);
  const launcher = overrides.launcher ?? runningLauncher();
  // Overridden variables or launch records are not in the texts: no key stands for such a validation.
  const key =
    overrides.variables || overrides.editLaunch
      ? null
      : desiredKey(absDir, [envText.text ?? "", fleetText.text ?? "", launchText.text ?? ""], launcher.digest);
  const recorded = overrides.recorded;
  const again =
    key !== null && recorded?.key === key && sameNodeFiles(recorded.node_files, nodeFiles) ? recorded : null;
  if (!again)
    issues.push(
      ...runRules({ vars: allVars, ...records, ...(referenced ? { referenced } : {}), indices, nodeFiles }).filter(
        (i) => !underFailed(i, failed),
      ),
    );
  if (issues.some((i) => i.rule === IMAGE_RULE))
    return { issues, imageTags: imageTagsToResolve(absDir, records.launch, records.fleet, launchRaw?.value) };
  if (issues.length > 0 || !fleet || !launch) return { issues };

  const specs = buildSpecs(absDir, fleet, launch, allVars, launcher, again?.input_hashes);
  const secrets = [...SECRET_VARIABLES].flatMap((n) =>
    Object.hasOwn(allVars, n) && allVars[n] !== "" ? [allVars[n] as string] : [],
  );
  const publicVars = Object.fromEntries(
    Object.entries(allVars)
      .filter(([k]) => !SECRET_VARIABLES.has(k))
      .sort(([a], [b]) => (a < b ? -1 : 1)),
  );
  return {
    issues: [],
    state: {
      dir: absDir,
      specs,
      rollout: rolloutPolicy(fleet.rollout),
      kv: kvPolicy(fleet.kv_transfer),
      hardware: { ...fleet.hardware },
      variables: publicVars,
      secrets,
      ...(key === null ? {} : { source: { key, node_files: [...nodeFiles] } }),
    },
  };
}

/** Resolve desired-relative path variables (seed paths are relative to the checkout). */
export function resolvePathVariables(dir: string, vars: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = Object.assign(Object.create(null) as Record<string, string>, vars);
  for (const name of PATH_VARIABLES) {
    if (Object.hasOwn(out, name) && out[name] !== "") out[name] = resolveDesiredPath(dir, out[name] as string);
  }
  for (const name of PATH_LIST_VARIABLES) {
    if (!Object.hasOwn(out, name) || out[name] === "") continue;
    out[name] = (out[name] as string)
      .split(":")
      .map((p) => (p === "" || isAbsolute(p) ? p : resolve(dir, p)))
      .join(":");
  }
  for (const name of COMMAND_VARIABLES) {
    if (Object.hasOwn(out, name) && out[name] !== "") out[name] = resolveDesiredPath(dir, out[name] as string, true);
  }
  return out;
}

/** Engine indices k named by the raw documents (fleet iids and launch keys). */
function engineIndices(fleet: unknown, launch: unknown): Set<number> {
  const ks = new Set<number>();
  const engines = (fleet as { engines?: unknown } | undefined)?.engines;
  if (Array.isArray(engines)) {
    for (const e of engines) {
      const iid = (e as { iid?: unknown } | null)?.iid;
      const k = typeof iid === "string" ? indexOfIid(iid) : undefined;
      if (k !== undefined) ks.add(k);
    }
  }
  const records = (launch as { engines?: unknown } | undefined)?.engines;
  if (records !== null && typeof records === "object" && !Array.isArray(records)) {
    for (const name of Object.keys(records)) {
      const k = indexOfEngineName(name);
      if (k !== undefined) ks.add(k);
    }
  }
  return ks;
}

/** A fleet.json read under the ceiling is held to the bound of the engines it lists. */
function withinCap(
  parsed: { value?: unknown; issues: ValidationIssue[] } | undefined,
  text: string | undefined,
  file: string,
  cap: SizeCap,
): { value?: unknown; issues: ValidationIssue[] } | undefined {
  const size = text === undefined ? 0 : Buffer.byteLength(text);
  if (!parsed || size <= cap.bytes) return parsed;
  return { issues: [{ file, path: "$", message: oversized(size, cap), rule: "syntax" }] };
}

function underFailed(issue: ValidationIssue, failed: Map<string, Set<string>>): boolean {
  const paths = failed.get(issue.file);
  if (!paths) return false;
  for (const p of paths) {
    if (issue.path === p || issue.path.startsWith(p + ".") || issue.path.startsWith(p + "[")) return true;
  }
  return false;
}
