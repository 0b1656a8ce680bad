// What a cross-record rule receives and how it names the place at fault: the
// contexts, the rule shapes, and the issue builders for fleet.json and
// engine-launch.json. Shared by the rules-*.ts files so each builds issues the
// same way.

import type { ValidationIssue } from "../errors.js";
import type { NodeFiles } from "./node-files.js";
import type { EnginePair } from "./engine-pairs.js";
import type { FleetForRules, SchemaFailures } from "./records-for-rules.js";
import { jsonPath, type EngineLaunchFile, type ParsedLaunchRecord } from "./schemas.js";

export const FLEET_FILE = "fleet.json";
export const LAUNCH_FILE = "engine-launch.json";

export interface LaunchContext {
  vars: Readonly<Record<string, string>>;
  launch: EngineLaunchFile;
}
export interface FullContext extends LaunchContext {
  fleet: FleetForRules;
  failures: SchemaFailures;
  /** The engines both files name, paired once for every rule of one validation (engine-pairs.ts). */
  pairs: readonly EnginePair[];
  /** What the nodes' ssh files are (node-files.ts); a file not in it is not judged. */
  nodeFiles?: NodeFiles;
}
/** The context of a rule about fleet.json alone: it runs even when engine-launch.json cannot be read. */
export type FleetContext = Omit<FullContext, "launch" | "pairs">;

export type RecordRule =
  | { name: string; needs: "launch"; check(ctx: LaunchContext): ValidationIssue[] }
  | { name: string; needs: "both"; check(ctx: FullContext): ValidationIssue[] };
export type FleetRule =
  | { name: string; needs: "fleet"; check(ctx: FleetContext): ValidationIssue[] }
  | { name: string; needs: "both"; check(ctx: FullContext): ValidationIssue[] };

export const recPath = (name: string, ...segments: PropertyKey[]) => jsonPath(["engines", name, ...segments]);

/** An issue at a field of the launch record `name`. */
export const launchIssue = (rule: string, name: string, segments: PropertyKey[], message: string): ValidationIssue => ({
  file: LAUNCH_FILE,
  path: recPath(name, ...segments),
  message,
  rule,
});

/** An issue at a place in fleet.json. */
export const fleetIssue = (rule: string, segments: PropertyKey[], message: string): ValidationIssue => ({
  file: FLEET_FILE,
  path: jsonPath(segments),
  message,
  rule,
});

/** Apply `fn` to every launch record and concatenate its issues. */
export const eachRecord = (launch: EngineLaunchFile, fn: (name: string, r: ParsedLaunchRecord) => ValidationIssue[]) =>
  Object.entries(launch.engines).flatMap(([name, r]) => fn(name, r));
