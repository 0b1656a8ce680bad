// nvidia-smi identity query (seed 000): `--query-gpu=pci.bus_id,name,uuid
// --format=csv`. The parser is pure so recorded output can be tested directly.

import { NarwhalError } from "../../errors.js";
import type { ObservedGpu } from "../types.js";
import type { HostAccess } from "../../hosts/types.js";
import { runTool, type ToolRunOptions } from "./run-tool.js";

export const NVIDIA_SMI_QUERY_ARGS = ["--query-gpu=pci.bus_id,name,uuid", "--format=csv"] as const;

const COLUMNS = ["pci.bus_id", "name", "uuid"] as const;

/**
 * Parse the CSV nvidia-smi prints for the query: a header line
 * `pci.bus_id, name, uuid`, then one line per GPU in index order with values
 * separated by ", ". Columns are located by header name, not position, so a
 * reordered query still parses. Throws on anything that is not that shape —
 * guessing at a GPU's identity is worse than stopping.
 */
export function parseNvidiaSmiCsv(text: string): ObservedGpu[] {
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "");
  const header = lines.shift();
  if (header === undefined) throw malformed("no output");
  const names = header.split(",").map((h) => h.trim());
  const at = Object.fromEntries(COLUMNS.map((c) => [c, names.indexOf(c)])) as Record<(typeof COLUMNS)[number], number>;
  const missing = COLUMNS.filter((c) => at[c] < 0);
  if (missing.length > 0) throw malformed(`header "${header}" lacks ${missing.join(", ")}`);

  return lines.map((line, index) => {
    const values = line.split(", ").map((v) => v.trim());
    if (values.length !== names.length)
      throw malformed(`line ${index + 2} "${line}" has ${values.length} fields, header has ${names.length}`);
    const busId = values[at["pci.bus_id"]] ?? "";
    const name = values[at.name] ?? "";
    const uuid = values[at.uuid] ?? "";
    if (name === "") throw malformed(`line ${index + 2} has an empty name`);
    const gpu: ObservedGpu = { index, name };
    if (busId !== "" && busId !== "[N/A]") gpu.bus_id = busId;
    if (uuid !== "" && uuid !== "[N/A]") gpu.uuid = uuid;
    return gpu;
  });
}

function malformed(why: string): NarwhalError {
  return new NarwhalError(`nvidia-smi output is not the expected CSV: ${why}`, {
    input: "node.nvidia_smi",
    fix: `Check that node.nvidia_smi runs NVIDIA's nvidia-smi and that "${NVIDIA_SMI_QUERY_ARGS.join(" ")}" works on this host.`,
    retryable: false,
  });
}

export interface NvidiaSmiResult {
  gpus: ObservedGpu[];
  /** Raw stdout, kept as evidence. */
  raw: string;
}

/** Run the identity query on the node with `nvidiaSmi` (path or name on the node's PATH) and parse it. */
export async function queryNvidiaGpus(
  host: HostAccess,
  nvidiaSmi: string,
  opts: ToolRunOptions,
): Promise<NvidiaSmiResult> {
  const raw = await runTool(host, nvidiaSmi, [...NVIDIA_SMI_QUERY_ARGS], "node.nvidia_smi", opts);
  return { gpus: parseNvidiaSmiCsv(raw), raw };
}
