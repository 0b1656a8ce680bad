// Cache-equivalence groups (seed 000) from the state records: engines with one
// signature share a representative, whose captured layout the others must
// match; a differing layout or page geometry is flagged (it needs its own
// fabric budget).
import type { EngineRecord } from "../state/store.js";
import type { CacheLayout } from "../phases/types.js";
import { append } from "./map-lists.js";
import { compareCodePoints } from "../desired/python-json.js";

/**
 * Layout fields that must agree within a signature group. Here, not beside the capture that writes
 * layouts: importing capture.ts built the zod schemas of its imports in every status (11 ms).
 */
export function layoutKey(l: CacheLayout): string {
  return JSON.stringify([l.block_size, l.num_gpu_blocks, l.gpu_kv_cache_tokens, l.cache_dtype, l.tensor_parallel_size]);
}

export interface GroupReport {
  signature: string;
  representative: string;
  roles: string[];
  /** Engines whose captured layout differs from the representative's. */
  differing: string[];
}

/**
 * The seed's PY_CACHE_GROUPS order: engines, and the groups by signature, sorted as Python sorts strings (by code
 * point); each group's first engine is its representative. (localeCompare agreed on engine-<k> names and hex
 * signatures, at 7-11 ms of a no-op's CPU: ICU's collator.)
 */
export function groupReport(records: EngineRecord[]): GroupReport[] {
  const bySig = new Map<string, EngineRecord[]>();
  for (const r of [...records].sort((a, b) => compareCodePoints(a.engine, b.engine))) {
    if (!r.group_signature) continue;
    append(bySig, r.group_signature, r);
  }
  return [...bySig.entries()]
    .sort(([a], [b]) => compareCodePoints(a, b))
    .map(([signature, members]) => {
      const rep = members[0]!;
      const repKey = rep.layout ? layoutKey(rep.layout) : null;
      const differing = members
        .filter((m) => repKey !== null && m.layout !== null && layoutKey(m.layout) !== repKey)
        .map((m) => m.engine);
      return { signature, representative: rep.engine, roles: members.map((m) => m.engine), differing };
    });
}

/** The seed's own output format: `<signature>: representative=<role>; roles=<a>,<b>`. */
export function renderGroups(groups: GroupReport[]): string {
  return groups
    .map(
      (g) =>
        `${g.signature}: representative=${g.representative}; roles=${g.roles.join(",")}` +
        (g.differing.length ? `; layout differs: ${g.differing.join(",")}` : ""),
    )
    .join("\n");
}
