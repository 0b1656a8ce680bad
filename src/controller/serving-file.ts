// state/serving-fleet.json: the router-facing fleet file (seed 003's fleet
// records {iid, url, attestation_url, role}), listing only engines a router may
// pair now. Written atomically (0600) whenever what it lists changes, before
// any engine it stops listing is stopped.
import path from "node:path";
import { readJsonIfExists, writeFileAtomic } from "../state/atomic-file.js";
import type { ServingFleet } from "./plan-types.js";

export const SERVING_FILE = "serving-fleet.json";

export function servingFilePath(stateDir: string): string {
  return path.join(stateDir, SERVING_FILE);
}

/** The serving fleet as last written; null when none was (or it is unreadable: it is rewritten from observation). */
export async function readServingFleet(stateDir: string): Promise<ServingFleet | null> {
  const data = await readJsonIfExists<ServingFleet>(servingFilePath(stateDir)).catch(() => null);
  if (!data || !Array.isArray(data.engines)) return null;
  // Files written before pairs were listed: none proven.
  return Array.isArray(data.pairs) ? data : { ...data, pairs: [] };
}

export async function writeServingFleet(stateDir: string, fleet: ServingFleet): Promise<void> {
  await writeFileAtomic(servingFilePath(stateDir), JSON.stringify(fleet, null, 2) + "\n", 0o600);
}
