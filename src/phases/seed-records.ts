// The launch records in the shape seed 000's own snippets read (seed 003 §15–16):
// - engine-launch.json in each run directory: the role-specific launch record the
//   plan was made from (PY_LAUNCH and PY_DEVICES read it through
//   NARWHAL_ENGINE_LAUNCH_CONFIG), with `sources` naming the files it was derived
//   from, relative to the run directory so the names hold wherever the run is copied;
// - engine-runtime.json beside it: the runtime observation PY_CACHE_GROUPS reads
//   through `sources.runtime` (`image_id`, `model_sha256`);
// - <state>/engine-launch.local.json: `{"engines": {<engine>: <record>}}` for the
//   whole fleet (NARWHAL_LAUNCH_CONFIG), with absolute `sources` paths;
// - <state>/engine-launch.sources.json beside it: seed 003's index of those references
//   ("config/engine-launch.sources.json indexes those references"), per engine the record's
//   own file and its `sources`, written with it so the two never disagree.
// Seed 003: "Launch records and their supporting extracts use mode 0600".
import path from "node:path";
import type { EngineSpec, LaunchRecord } from "../desired/types.js";
import { derivedLaunchFields } from "../desired/launcher-managed.js";
import { compareCodePoints } from "../desired/python-json.js";
import { readJsonIfExists, writeFileAtomic } from "../state/atomic-file.js";
import type { RunFile } from "../state/run-dir.js";
import type { Inspection } from "./types.js";
import { INSPECTION_FILE } from "./prepare.js";

export const ENGINE_LAUNCH_FILE = "engine-launch.json";
export const ENGINE_RUNTIME_FILE = "engine-runtime.json";
export const FLEET_LAUNCH_FILE = "engine-launch.local.json";
export const FLEET_SOURCES_FILE = "engine-launch.sources.json";

/** One engine's entry in engine-launch.sources.json: where its record is and what it was derived from. */
export interface SeedSourcesEntry {
  /** The run's engine-launch.json (absolute). */
  record: string;
  /** The record's `sources`, the run's own files as absolute paths. */
  sources: Record<string, string>;
}

/** The role-specific launch record: the derived fields are always present. */
export type SeedLaunchRecord = LaunchRecord & Required<Pick<LaunchRecord, "environment" | "vllm_args">>;

/** engine-runtime.json: what the runtime and the checkpoint were observed to be when the plan was made. */
export interface SeedRuntimeObservation {
  engine: string;
  node: string;
  observed_at: string;
  /** Container image id, or narwhal's native runtime identity ("native:<sha256>"). */
  image_id: string;
  /** sha256 of <model dir>/config.json: the group signature's model_config_sha256. */
  model_sha256: string;
  group_signature: string;
}

/** The two files prepare writes into a fresh run directory (0600). */
export function seedRecordFiles(spec: EngineSpec, inspection: Inspection): RunFile[] {
  const launch = spec.launch;
  const derived = derivedLaunchFields(launch);
  const record: SeedLaunchRecord = {
    ...launch,
    environment: launch.environment ?? derived.environment,
    vllm_args: launch.vllm_args ?? derived.vllm_args,
    // The operator's own references stay; the two narwhal derived this record from are its own
    // (a desired `sources.runtime` would otherwise point the seed's grouping at another file).
    sources: { ...launch.sources, inspection: INSPECTION_FILE, runtime: ENGINE_RUNTIME_FILE },
  };
  const runtime: SeedRuntimeObservation = {
    engine: spec.name,
    node: inspection.node,
    observed_at: inspection.inspected_at,
    image_id: inspection.image_id,
    model_sha256: inspection.model_config_sha256,
    group_signature: inspection.group_signature,
  };
  return [
    { name: ENGINE_LAUNCH_FILE, data: JSON.stringify(record, null, 2) + "\n", mode: 0o600 },
    { name: ENGINE_RUNTIME_FILE, data: JSON.stringify(runtime, null, 2) + "\n", mode: 0o600 },
  ];
}

export function fleetLaunchPath(stateDir: string): string {
  return path.join(stateDir, FLEET_LAUNCH_FILE);
}

export function fleetSourcesPath(stateDir: string): string {
  return path.join(stateDir, FLEET_SOURCES_FILE);
}

/** A run's record with its sources as absolute paths; null for a run prepared before these records existed. */
export async function readRunLaunchRecord(runDir: string): Promise<SeedLaunchRecord | null> {
  const record = await readJsonIfExists<SeedLaunchRecord>(path.join(runDir, ENGINE_LAUNCH_FILE));
  if (!record) return null;
  const sources = Object.fromEntries(
    Object.entries(record.sources).map(([k, v]) => [
      k,
      k === "inspection" || k === "runtime" ? path.join(runDir, v) : v,
    ]),
  );
  return { ...record, sources };
}

/**
 * Write <state>/engine-launch.local.json and its index <state>/engine-launch.sources.json from each
 * engine's current run (engines in name order; engines without a run, or whose run has no record,
 * are left out). Each atomic, 0600; the index is written second, so a reader of the index finds the
 * records it names already current.
 */
export async function writeFleetLaunchConfig(
  stateDir: string,
  runs: ReadonlyArray<{ engine: string; run_dir: string | null }>,
): Promise<void> {
  const engines: Record<string, SeedLaunchRecord> = {};
  const index: Record<string, SeedSourcesEntry> = {};
  for (const { engine, run_dir } of [...runs].sort((a, b) => compareCodePoints(a.engine, b.engine))) {
    const record = run_dir ? await readRunLaunchRecord(run_dir) : null;
    if (!record || !run_dir) continue;
    engines[engine] = record;
    index[engine] = { record: path.join(run_dir, ENGINE_LAUNCH_FILE), sources: record.sources };
  }
  await writeFileAtomic(fleetLaunchPath(stateDir), JSON.stringify({ engines }, null, 2) + "\n", 0o600);
  await writeFileAtomic(fleetSourcesPath(stateDir), JSON.stringify({ engines: index }, null, 2) + "\n", 0o600);
}
