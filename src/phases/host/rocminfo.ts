// rocminfo agent listing (seed 000: "On ROCm, count agents with Device Type set
// to GPU and use Marketing Name for the product"). CPU agents are listed too and
// must be skipped. The parser is pure so recorded output can be tested directly.

import { NarwhalError } from "../../errors.js";
import type { ObservedGpu } from "../types.js";
import type { HostAccess } from "../../hosts/types.js";
import { runTool, type ToolRunOptions } from "./run-tool.js";

/** Top-level fields of one HSA agent, e.g. {"Name": "gfx942", "Device Type": "GPU", ...}. */
export type RocmAgent = Record<string, string>;

// Agent blocks look like:
//   *******
//   Agent 3
//   *******
//     Name:                    gfx942
//     Uuid:                    GPU-07386a321fa45d1e
//     Marketing Name:          AMD Instinct MI300X
// Nested sections (Pool Info, ISA Info) are indented further and repeat keys
// such as "Name", so only the two-space level is read. rocminfo pads values
// with trailing spaces; values may themselves contain colons.
const AGENT_HEADER = /^Agent \d+$/;
const TOP_LEVEL_FIELD = /^ {2}(\S[^:]*?):\s*(.*)$/;

export function parseRocminfoAgents(text: string): RocmAgent[] {
  const agents: RocmAgent[] = [];
  let current: RocmAgent | undefined;
  for (const rawLine of text.split(/\r?\n/)) {
    const line = rawLine.trimEnd();
    if (AGENT_HEADER.test(line)) {
      current = {};
      agents.push(current);
      continue;
    }
    if (!current) continue;
    const field = TOP_LEVEL_FIELD.exec(line);
    if (field) {
      const [, key = "", value = ""] = field;
      if (!(key in current)) current[key] = value.trim();
    }
  }
  return agents;
}

/** GPU agents in listing order; their position is the ROCR_VISIBLE_DEVICES index. */
export function parseRocminfoGpus(text: string): ObservedGpu[] {
  const agents = parseRocminfoAgents(text);
  if (agents.length === 0) {
    throw new NarwhalError("rocminfo output lists no HSA agents", {
      input: "node.rocminfo",
      fix: "Check that node.rocminfo runs ROCm's rocminfo and that the amdgpu/ROCk driver is loaded on this host.",
      retryable: false,
    });
  }
  return agents
    .filter((a) => a["Device Type"] === "GPU")
    .map((agent, index) => {
      const gpu: ObservedGpu = { index, name: agent["Marketing Name"] || agent["Name"] || "" };
      const uuid = agent["Uuid"];
      // Devices without a unique id report the placeholder "GPU-XX".
      if (uuid && uuid !== "GPU-XX") gpu.uuid = uuid;
      return gpu;
    });
}

export interface RocminfoResult {
  gpus: ObservedGpu[];
  /** Raw stdout, kept as evidence. */
  raw: string;
}

/** Run `rocminfo` on the node (path or name on the node's PATH) and parse its GPU agents. */
export async function queryRocmGpus(host: HostAccess, rocminfo: string, opts: ToolRunOptions): Promise<RocminfoResult> {
  const raw = await runTool(host, rocminfo, [], "node.rocminfo", opts);
  return { gpus: parseRocminfoGpus(raw), raw };
}
