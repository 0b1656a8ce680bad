// What the cross-record rules see when a file fails its schema. One bad record
// must not hide every rule about the others (a tree with five mistakes reports
// five), so each record is checked against its own schema and the rules run
// over those that pass. A record that fails is reported by the schema and
// skipped by the rules, and the rules never call it missing: its mistake is
// already on the list, and "n2 has no launch record" would be a consequence of
// it, not a second mistake.

import {
  EngineNameSchema,
  FleetEngineSchema,
  FleetNodeSchema,
  HardwareSchema,
  IID_PATTERN,
  LaunchRecordSchema,
  RolloutSchema,
  type EngineLaunchFile,
  type FleetEngine,
  type FleetFile,
  type FleetNode,
  type Hardware,
  type ParsedLaunchRecord,
  type RolloutBlock,
} from "./schemas.js";

/**
 * fleet.json as the rules see it. A record that failed its schema is a hole
 * (undefined), so every other record keeps its index and its JSON path.
 * A whole fleet.json that passed is one of these with no holes.
 */
export interface FleetForRules {
  engines: ReadonlyArray<FleetEngine | undefined>;
  nodes: ReadonlyArray<FleetNode | undefined>;
  /** Absent when hardware failed its schema; rules comparing against it are skipped. */
  hardware?: Hardware;
  /** Absent when fleet.json has no rollout block or it failed its schema. */
  rollout?: RolloutBlock;
}

/**
 * Records present in the files that failed their schema. When a file's list
 * is incomplete (a record whose name cannot be read, or an empty list the
 * schema already rejects), "X has no partner there" would be a guess: the
 * unreadable record may be the partner.
 */
export interface SchemaFailures {
  /** iids written on fleet engine records that failed (when the iid itself is well-formed). */
  fleetIids: ReadonlySet<string>;
  /** Keys of launch records that failed. */
  launchNames: ReadonlySet<string>;
  /** A fleet engine record failed with an iid that names no engine, or the list is empty. */
  fleetEnginesIncomplete: boolean;
  /** A launch record key is not engine-<k>, or there are no records. */
  launchRecordsIncomplete: boolean;
  /** A node record failed (which engines it lists is unknown), or there are no nodes. */
  nodesIncomplete: boolean;
}

export interface RecordsForRules {
  fleet?: FleetForRules;
  launch?: EngineLaunchFile;
  failures: SchemaFailures;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/**
 * The records of the (substituted) documents that pass their own schema.
 * `fleetParsed`/`launchParsed` are the whole-file results when the file passed,
 * used as they are. A document whose outer shape is wrong (not an object, or
 * engines/nodes not lists) gives the rules nothing from that file.
 */
export function recordsForRules(
  fleetDoc: unknown,
  fleetParsed: FleetFile | undefined,
  launchDoc: unknown,
  launchParsed: EngineLaunchFile | undefined,
): RecordsForRules {
  const fleetIids = new Set<string>();
  const launchNames = new Set<string>();
  let fleetEnginesIncomplete = false;
  let launchRecordsIncomplete = false;
  let nodesIncomplete = false;

  let fleet: FleetForRules | undefined = fleetParsed;
  if (!fleet && isObject(fleetDoc) && Array.isArray(fleetDoc["engines"]) && Array.isArray(fleetDoc["nodes"])) {
    const engines = (fleetDoc["engines"] as unknown[]).map((raw) => {
      const parsed = FleetEngineSchema.safeParse(raw);
      if (parsed.success) return parsed.data;
      const iid = isObject(raw) ? raw["iid"] : undefined;
      if (typeof iid === "string" && IID_PATTERN.test(iid)) fleetIids.add(iid);
      else fleetEnginesIncomplete = true;
      return undefined;
    });
    const nodes = (fleetDoc["nodes"] as unknown[]).map((raw) => {
      const parsed = FleetNodeSchema.safeParse(raw);
      if (!parsed.success) nodesIncomplete = true;
      return parsed.data;
    });
    if (engines.length === 0) fleetEnginesIncomplete = true;
    if (nodes.length === 0) nodesIncomplete = true;
    const hardware = HardwareSchema.safeParse(fleetDoc["hardware"]);
    const rollout = fleetDoc["rollout"] === undefined ? undefined : RolloutSchema.safeParse(fleetDoc["rollout"]);
    fleet = {
      engines,
      nodes,
      ...(hardware.success ? { hardware: hardware.data } : {}),
      ...(rollout?.success ? { rollout: rollout.data } : {}),
    };
  }

  let launch: EngineLaunchFile | undefined = launchParsed;
  if (!launch && isObject(launchDoc) && isObject(launchDoc["engines"])) {
    const engines: Record<string, ParsedLaunchRecord> = Object.create(null) as Record<string, ParsedLaunchRecord>;
    const entries = Object.entries(launchDoc["engines"]);
    for (const [name, raw] of entries) {
      const named = EngineNameSchema.safeParse(name).success;
      const parsed = LaunchRecordSchema.safeParse(raw);
      if (named && parsed.success) engines[name] = parsed.data;
      else launchNames.add(name);
      if (!named) launchRecordsIncomplete = true;
    }
    if (entries.length === 0) launchRecordsIncomplete = true;
    launch = { engines };
  }

  return {
    ...(fleet ? { fleet } : {}),
    ...(launch ? { launch } : {}),
    failures: { fleetIids, launchNames, fleetEnginesIncomplete, launchRecordsIncomplete, nodesIncomplete },
  };
}
