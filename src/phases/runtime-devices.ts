// Which GPU a plan's selected device is, as the checked runtime sees it (seed
// 001: "numeric ordinals and UUID prefixes resolve inside the checked runtime
// with its recorded environment"). Inside a CUDA process ordinals follow
// CUDA_DEVICE_ORDER (FASTEST_FIRST unless PCI_BUS_ID), not nvidia-smi's PCI bus
// order, so ordinal 0 can be another GPU than nvidia-smi's index 0. The query
// (inspect_runtime.py "cuda-devices") runs through the backend like every
// runtime inspection; the resolution rules below are pure.
import path from "node:path";
import type { CheckedRun } from "./checked-run.js";
import type { LaunchPlan } from "./plan.js";
import { LAUNCH_FILE } from "./prepare.js";
import { resolveGpuId } from "./host/gpu-selection.js";
import { inspectRuntime, type RuntimeInspectOptions } from "./runtime-inspect.js";

export interface RuntimeDevice {
  /** The device's CUDA ordinal in the runtime's own enumeration order. */
  ordinal: number;
  uuid: string;
  pci_bus_id?: string;
}

/** What the runtime's CUDA driver enumerates: every device, and those its recorded environment makes visible. */
export interface RuntimeDevices {
  binding: string;
  visibility_env: string;
  visible_devices: string | null;
  cuda_device_order: string;
  devices: RuntimeDevice[];
  visible: RuntimeDevice[];
  inspection_id: string;
}

/** The evidence shared-start.json keeps: the runtime's answer and the device chosen from it. */
export interface RuntimeResolution extends RuntimeDevices {
  selected: string;
  ordinal: number;
  uuid: string;
}

export type DeviceResolution =
  { ok: true; resolution: RuntimeResolution } | { ok: false; problem: string; fix: string };

const listed = (devices: RuntimeDevice[]) =>
  devices.length ? devices.map((d) => `${d.ordinal}=${d.uuid}`).join(", ") : "no devices";

const BY_UUID_FIX = "select the GPU by its full UUID (GPU-…), which no device order renumbers";

/**
 * Resolve `selected` (an ordinal or a UUID / UUID prefix, as CUDA_VISIBLE_DEVICES takes it) in the
 * runtime's enumeration; it must be `wantUuid`, and the runtime's own first visible device must agree.
 */
export function resolveRuntimeDevice(selected: string, wantUuid: string, runtime: RuntimeDevices): DeviceResolution {
  const order = `CUDA_DEVICE_ORDER=${runtime.cuda_device_order}`;
  const r = resolveGpuId(
    selected,
    runtime.devices.map((d) => ({ index: d.ordinal, uuid: d.uuid, name: "" })),
  );
  if (!r.ok) {
    const numeric = /^\d+$/.test(selected.trim());
    const problem =
      r.reason === "ambiguous"
        ? `UUID prefix ${selected} is ambiguous: it matches ${r.matches.map((g) => g.uuid).join(" and ")} in the runtime`
        : numeric
          ? `ordinal ${selected} is out of range: the runtime (${order}) lists ${runtime.devices.length} device(s): ${listed(runtime.devices)}`
          : `no device the runtime lists has UUID ${selected} (${listed(runtime.devices)})`;
    return { ok: false, problem, fix: `In gpu_ids, ${BY_UUID_FIX} (${wantUuid}), and prepare fresh runs.` };
  }
  const uuid = r.gpu.uuid!;
  const seen = runtime.visible[0];
  if (!seen || seen.uuid.toLowerCase() !== uuid.toLowerCase())
    return {
      ok: false,
      problem: `resolves to ${uuid} in the runtime's order (${order}), but with ${runtime.visibility_env}=${runtime.visible_devices ?? "(unset)"} the runtime itself makes ${listed(runtime.visible)} visible`,
      fix: `In gpu_ids, ${BY_UUID_FIX} (${wantUuid}) as CUDA spells it, and prepare fresh runs.`,
    };
  if (uuid.toLowerCase() !== wantUuid.toLowerCase())
    return {
      ok: false,
      problem: `resolves to ${uuid} (runtime ordinal ${r.gpu.index}, ${order}; the runtime lists ${listed(runtime.devices)}), not shared_device.gpu_uuid ${wantUuid}`,
      fix: `Ordinals count in the runtime's device order, not nvidia-smi's: in gpu_ids, ${BY_UUID_FIX} (${wantUuid}), or correct shared_device.gpu_uuid, and prepare fresh runs.`,
    };
  return { ok: true, resolution: { ...runtime, selected, ordinal: r.gpu.index, uuid } };
}

/** Ask the checked runtime of `loaded`, with its recorded environment, which CUDA devices it sees. */
export async function queryRuntimeDevices(
  action: string,
  loaded: CheckedRun,
  opts: RuntimeInspectOptions,
): Promise<RuntimeDevices> {
  const { inspection_id, result } = await inspectRuntime(action, loaded, "cuda-devices", opts);
  return { ...(result as unknown as Omit<RuntimeDevices, "inspection_id">), inspection_id };
}

/** "CUDA_VISIBLE_DEVICES=0 (gpu_ids in RUN/launch.json)": the input at fault, with its file. */
export const selectedDeviceInput = (plan: LaunchPlan, runDir: string): string =>
  `${plan.gpu.visibility_env}=${plan.gpu.ids[0]} (gpu_ids in ${path.join(runDir, LAUNCH_FILE)})`;
