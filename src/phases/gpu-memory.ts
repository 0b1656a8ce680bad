// Whole-device GPU memory readings through the node's nvidia-smi, for shared
// startup's budget: `--query-gpu=uuid,memory.total,memory.used
// --format=csv,noheader,nounits` prints one "uuid, total, used" line (MiB) per
// GPU in index order. The parser is pure so recorded output tests it directly.
import { NarwhalError } from "../errors.js";
import type { HostAccess } from "../hosts/types.js";
import { runTool, type ToolRunOptions } from "./host/run-tool.js";

export const GPU_MEMORY_QUERY_ARGS = [
  "--query-gpu=uuid,memory.total,memory.used",
  "--format=csv,noheader,nounits",
] as const;

export interface GpuMemory {
  index: number;
  uuid: string;
  total_mib: number;
  used_mib: number;
}

export interface GpuMemoryReading {
  at: string;
  gpus: GpuMemory[];
}

export function parseGpuMemoryCsv(text: string): GpuMemory[] {
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "");
  return lines.map((line, index) => {
    const [uuid = "", total = "", used = ""] = line.split(",").map((v) => v.trim());
    const totalMib = Number(total);
    const usedMib = Number(used);
    if (!uuid || !/^\d+$/.test(total) || !/^\d+$/.test(used)) {
      throw new NarwhalError(`nvidia-smi memory line ${index + 1} "${line}" is not "uuid, total MiB, used MiB"`, {
        input: "node.nvidia_smi",
        fix: `Check that node.nvidia_smi runs NVIDIA's nvidia-smi and that "${GPU_MEMORY_QUERY_ARGS.join(" ")}" works on this host.`,
        retryable: false,
      });
    }
    return { index, uuid, total_mib: totalMib, used_mib: usedMib };
  });
}

/** One reading on the GPUs' own node (the host of the engines that share them). */
export async function readGpuMemory(
  host: HostAccess,
  nvidiaSmi: string,
  opts: ToolRunOptions,
): Promise<GpuMemoryReading> {
  const raw = await runTool(host, nvidiaSmi, [...GPU_MEMORY_QUERY_ARGS], "node.nvidia_smi", opts);
  return { at: new Date().toISOString(), gpus: parseGpuMemoryCsv(raw) };
}

export function gpuByUuid(reading: GpuMemoryReading, uuid: string): GpuMemory | undefined {
  return reading.gpus.find((g) => g.uuid.toLowerCase() === uuid.toLowerCase());
}
