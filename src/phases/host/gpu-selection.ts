// Resolve a launch record's gpu_ids against the GPUs the host's tool lists
// (seed 000: "confirm every selected index or UUID is visible"). Pure.

import type { ObservedGpu } from "../types.js";

export type GpuIdResolution =
  | { id: string; ok: true; gpu: ObservedGpu }
  | { id: string; ok: false; reason: "not-visible" | "ambiguous"; matches: ObservedGpu[] };

/**
 * A decimal id is the tool's index (what CUDA_VISIBLE_DEVICES /
 * ROCR_VISIBLE_DEVICES mean by a number). Anything else is a UUID or a UUID
 * prefix, as CUDA accepts ("GPU-4f1a7c2e"); a prefix matching two GPUs is
 * refused because the runtime would pick one silently.
 */
export function resolveGpuId(id: string, gpus: ObservedGpu[]): GpuIdResolution {
  const wanted = id.trim();
  if (/^\d+$/.test(wanted)) {
    const gpu = gpus.find((g) => g.index === Number(wanted));
    return gpu ? { id, ok: true, gpu } : { id, ok: false, reason: "not-visible", matches: [] };
  }
  const lower = wanted.toLowerCase();
  const exact = gpus.filter((g) => g.uuid?.toLowerCase() === lower);
  const matches =
    exact.length > 0 ? exact : gpus.filter((g) => lower !== "" && g.uuid?.toLowerCase().startsWith(lower));
  if (matches.length === 1 && matches[0]) return { id, ok: true, gpu: matches[0] };
  return { id, ok: false, reason: matches.length === 0 ? "not-visible" : "ambiguous", matches };
}

export function resolveGpuIds(ids: string[], gpus: ObservedGpu[]): GpuIdResolution[] {
  return ids.map((id) => resolveGpuId(id, gpus));
}

/** "0 (GPU-4f1a…, 00000000:18:00.0)" — how a GPU is named in messages. */
export function describeGpu(gpu: ObservedGpu): string {
  const extra = [gpu.uuid, gpu.bus_id].filter(Boolean).join(", ");
  return extra ? `${gpu.index} (${extra})` : String(gpu.index);
}
