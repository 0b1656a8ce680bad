// The GPU half of host inspection: PCI scan, then the vendor's identity tool,
// then the launch record's accelerator and gpu_ids checked against what the
// tool lists, all on the engine's node. Problems are collected, never thrown
// (except cancellation and a node that cannot be reached).

import type { EngineSpec } from "../desired/types.js";
import type { HostAccess } from "../hosts/types.js";
import type { InspectionProblem } from "./inspect-problems.js";
import { problemFromError } from "./inspect-problems.js";
import { describeGpu, resolveGpuIds } from "./host/gpu-selection.js";
import { queryNvidiaGpus } from "./host/nvidia-smi.js";
import { scanPciAccelerators, type GpuVendor } from "./host/pci-scan.js";
import { queryRocmGpus } from "./host/rocminfo.js";
import type { ToolRunOptions } from "./host/run-tool.js";
import type { Inspection, ObservedGpu } from "./types.js";

export interface GpuObservation {
  vendors: GpuVendor[];
  gpus: ObservedGpu[];
  selected: Inspection["selected"];
  /** Product of the selected GPUs ("" when nothing could be observed). */
  accelerator: string;
  tool_output: string;
}

/** The vendor whose runtime the launch record targets, read from its visibility variable. */
export function runtimeVendor(spec: EngineSpec): GpuVendor {
  return spec.launch.gpu_visibility_env === "ROCR_VISIBLE_DEVICES" ? "amd" : "nvidia";
}

export async function observeGpus(
  host: HostAccess,
  spec: EngineSpec,
  tool: ToolRunOptions,
  problems: InspectionProblem[],
): Promise<GpuObservation> {
  const none: GpuObservation = { vendors: [], gpus: [], selected: [], accelerator: "", tool_output: "" };

  let vendors: GpuVendor[];
  try {
    vendors = (await scanPciAccelerators(host, spec.node.sysfs_root, tool.signal)).vendors;
  } catch (err) {
    problems.push(problemFromError(err, "node.sysfs_root"));
    return none;
  }

  // Only the tool of the runtime the engine uses is run: its index order is the
  // one gpu_ids and the visibility variable refer to.
  const vendor = runtimeVendor(spec);
  if (!vendors.includes(vendor)) {
    problems.push({
      message: `the launch record targets ${vendor} GPUs (${spec.launch.gpu_visibility_env}) but the PCI scan found only ${vendors.join(", ")} accelerators`,
      input: "launch.gpu_visibility_env",
      fix: "Place this engine on a host with the accelerator it was planned for, or regenerate its launch record for this host.",
      failure: "terminal",
    });
    return { ...none, vendors };
  }

  let gpus: ObservedGpu[];
  let raw: string;
  try {
    ({ gpus, raw } =
      vendor === "nvidia"
        ? await queryNvidiaGpus(host, spec.node.nvidia_smi, tool)
        : await queryRocmGpus(host, spec.node.rocminfo, tool));
  } catch (err) {
    problems.push(problemFromError(err, vendor === "nvidia" ? "node.nvidia_smi" : "node.rocminfo"));
    return { ...none, vendors };
  }
  const toolName = vendor === "nvidia" ? "nvidia-smi" : "rocminfo";
  if (gpus.length === 0) {
    problems.push({
      message: `${toolName} lists no GPU although the PCI scan found ${vendor} accelerators`,
      input: vendor === "nvidia" ? "node.nvidia_smi" : "node.rocminfo",
      fix: "Load the GPU driver on this engine host (or fix the container's device exposure), then reconcile again.",
      failure: "terminal",
    });
    return { ...none, vendors, tool_output: raw };
  }

  const selected: Inspection["selected"] = [];
  const visible = gpus.map(describeGpu).join(", ");
  resolveGpuIds(spec.launch.gpu_ids, gpus).forEach((r, i) => {
    if (r.ok) {
      selected.push(r.gpu.uuid ? { id: r.id, index: r.gpu.index, uuid: r.gpu.uuid } : { id: r.id, index: r.gpu.index });
      return;
    }
    problems.push({
      message:
        r.reason === "ambiguous"
          ? `gpu id "${r.id}" matches ${r.matches.length} GPUs (${r.matches.map(describeGpu).join(", ")})`
          : `gpu id "${r.id}" is not visible on ${spec.node.name}; ${toolName} lists ${visible}`,
      input: `launch.gpu_ids[${i}]`,
      fix:
        r.reason === "ambiguous"
          ? "Give enough of the UUID to name exactly one GPU."
          : "Select GPUs this host exposes (index or UUID) in gpu_ids, or restore the missing GPU.",
      failure: "terminal",
    });
  });

  // Compare the product of the GPUs the engine will use; if none resolved,
  // every GPU on the host stands in so a wrong product is still reported.
  const compared = selected.length > 0 ? gpus.filter((g) => selected.some((s) => s.index === g.index)) : gpus;
  const expected = spec.launch.accelerator;
  const products = [...new Set(compared.map((g) => g.name))];
  for (const product of products.filter((p) => p !== expected)) {
    const on = compared
      .filter((g) => g.name === product)
      .map(describeGpu)
      .join(", ");
    problems.push({
      message: `observed accelerator "${product}" on GPU ${on} does not match launch.accelerator "${expected}" (expected to equal the fleet's hardware.accelerator)`,
      input: "launch.accelerator (fleet hardware.accelerator)",
      fix: `Set hardware.accelerator and the launch record's accelerator to the product the host reports, or place this engine on a host with "${expected}".`,
      failure: "terminal",
    });
  }

  return { vendors, gpus, selected, accelerator: products[0] ?? "", tool_output: raw };
}
