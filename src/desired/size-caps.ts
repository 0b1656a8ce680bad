// How large a desired file may be. deployment.env and the node files do not grow
// with the fleet: a flat 1 MiB. fleet.json and engine-launch.json hold one record
// per engine, so their bound grows with the engine count fleet.json lists (a
// 1000-engine launch file is about 1 MiB of ordinary records): 1 MiB plus 8 KiB
// per engine, several times an ordinary record with launch extras, so a file that
// runs away (a generator looping, a log pasted in) is still refused long before
// it costs real memory. The ceiling is the bound at the most engines a fleet can
// name (iids n1..n9999): what is read before the count is known.

export const MAX_FILE_BYTES = 1024 * 1024;
export const PER_ENGINE_BYTES = 8 * 1024;
/** The highest engine index k (IID_PATTERN in schemas.ts: n1..n9999). */
const MAX_ENGINE_INDEX = 9999;

/** A size limit and how an issue explains it. */
export interface SizeCap {
  bytes: number;
  /** Why the limit is what it is, e.g. "1 MiB" or "1 MiB + 8 KiB × 12 engines in fleet.json". */
  why: string;
}

export const FLAT_CAP: SizeCap = { bytes: MAX_FILE_BYTES, why: "1 MiB" };

/** The bound of a per-engine JSON file; `engines` undefined (fleet.json unread): the ceiling. */
export function perEngineCap(engines: number | undefined): SizeCap {
  const n = Math.min(engines ?? MAX_ENGINE_INDEX, MAX_ENGINE_INDEX);
  const why =
    engines === undefined
      ? `1 MiB + 8 KiB × ${MAX_ENGINE_INDEX} engines, the most a fleet can name`
      : `1 MiB + 8 KiB × ${n} engine${n === 1 ? "" : "s"} in fleet.json`;
  return { bytes: MAX_FILE_BYTES + PER_ENGINE_BYTES * n, why };
}

/** The issue message of a file over its cap (the same words before and after reading). */
export const oversized = (size: number, cap: SizeCap): string =>
  `is ${size} bytes; the limit is ${cap.bytes} (${cap.why}); shorten it`;

/** How many engines a raw fleet.json document lists (undefined: it lists none readable). */
export function engineCount(fleet: unknown): number | undefined {
  const engines = (fleet as { engines?: unknown } | null | undefined)?.engines;
  return Array.isArray(engines) ? engines.length : undefined;
}
