// Pure parsers of host inspection against recorded tool output.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { resolveGpuId } from "../../src/phases/host/gpu-selection.js";
import { parseNvidiaSmiCsv } from "../../src/phases/host/nvidia-smi.js";
import { classifyPciDevice } from "../../src/phases/host/pci-scan.js";
import { parseRocminfoAgents, parseRocminfoGpus } from "../../src/phases/host/rocminfo.js";

const hosts = new URL("../fixtures/hosts/", import.meta.url);
const recorded = (rel: string) => readFileSync(new URL(rel, hosts), "utf8");

describe("parseNvidiaSmiCsv", () => {
  it("parses the recorded H100 query output in index order", () => {
    expect(parseNvidiaSmiCsv(recorded("h100x2/tool-output/nvidia-smi-query.csv"))).toEqual([
      {
        index: 0,
        bus_id: "00000000:18:00.0",
        name: "NVIDIA H100 80GB HBM3",
        uuid: "GPU-4f1a7c2e-8b3d-4e6f-9a0b-1c2d3e4f5a6b",
      },
      {
        index: 1,
        bus_id: "00000000:2A:00.0",
        name: "NVIDIA H100 80GB HBM3",
        uuid: "GPU-9e8d7c6b-5a4f-4e2d-8c0b-a9f8e7d6c5b4",
      },
    ]);
  });

  it("locates columns by header name and tolerates CRLF and [N/A]", () => {
    const text = "uuid, name, pci.bus_id\r\n[N/A], NVIDIA A100-SXM4-80GB, 00000000:07:00.0\r\n";
    expect(parseNvidiaSmiCsv(text)).toEqual([{ index: 0, bus_id: "00000000:07:00.0", name: "NVIDIA A100-SXM4-80GB" }]);
  });

  it("returns no GPUs for a header alone", () => {
    expect(parseNvidiaSmiCsv("pci.bus_id, name, uuid\n")).toEqual([]);
  });

  it("refuses output that is not the query's CSV", () => {
    expect(() => parseNvidiaSmiCsv("")).toThrow(/no output/);
    expect(() => parseNvidiaSmiCsv("No devices were found\n")).toThrow(/lacks pci.bus_id, name, uuid/);
    expect(() => parseNvidiaSmiCsv("pci.bus_id, name, uuid\n00000000:18:00.0, H100\n")).toThrow(/2 fields/);
  });
});

describe("parseRocminfoAgents / parseRocminfoGpus", () => {
  const text = recorded("mi300x/tool-output/rocminfo.txt");

  it("reads every agent's top-level fields, not the nested ISA/Pool ones", () => {
    const agents = parseRocminfoAgents(text);
    expect(agents).toHaveLength(3);
    expect(agents[0]).toMatchObject({ "Device Type": "CPU", Uuid: "CPU-XX" });
    expect(agents[1]).toMatchObject({
      Name: "gfx942",
      "Device Type": "GPU",
      "Marketing Name": "AMD Instinct MI300X",
      BDFID: "6912",
    });
    // "Packet Processor uCode:: 166": a value may itself start with a colon.
    expect(agents[1]?.["Packet Processor uCode"]).toBe(": 166");
  });

  it("counts only GPU agents, product from Marketing Name, uuid from Uuid", () => {
    expect(parseRocminfoGpus(text)).toEqual([
      { index: 0, name: "AMD Instinct MI300X", uuid: "GPU-07386a321fa45d1e" },
      { index: 1, name: "AMD Instinct MI300X", uuid: "GPU-c14abb436c69353f" },
    ]);
  });

  it("keeps colons inside values and drops the GPU-XX placeholder uuid", () => {
    const text2 = [
      "*******",
      "Agent 1",
      "*******",
      "  Name:                    gfx942   ",
      "  Uuid:                    GPU-XX",
      "  Marketing Name:          AMD Instinct MI300X OAM: 750W SKU   ",
      "  Device Type:             GPU",
    ].join("\n");
    expect(parseRocminfoGpus(text2)).toEqual([{ index: 0, name: "AMD Instinct MI300X OAM: 750W SKU" }]);
  });

  it("refuses output without agents (driver not loaded)", () => {
    expect(() => parseRocminfoGpus("ROCk module is NOT loaded, possibly no GPU devices\n")).toThrow(/no HSA agents/);
  });
});

describe("classifyPciDevice", () => {
  it("counts NVIDIA/AMD display and processing-accelerator classes only", () => {
    expect(classifyPciDevice("0x030200\n", "0x10de\n")).toBe("nvidia");
    expect(classifyPciDevice("0x120000", "0x1002")).toBe("amd");
    expect(classifyPciDevice("0x030000", "0x1a03")).toBeUndefined(); // BMC VGA
    expect(classifyPciDevice("0x020000", "0x10de")).toBeUndefined(); // NVIDIA NIC class
    expect(classifyPciDevice("0x060000", "0x1022")).toBeUndefined(); // AMD CPU host bridge
  });
});

describe("resolveGpuId", () => {
  const gpus = [
    { index: 0, name: "X", uuid: "GPU-4f1a7c2e-aaaa" },
    { index: 1, name: "X", uuid: "GPU-4f1b0000-bbbb" },
  ];
  it("resolves indices, full UUIDs (any case) and unique prefixes", () => {
    expect(resolveGpuId("1", gpus)).toMatchObject({ ok: true, gpu: { index: 1 } });
    expect(resolveGpuId("gpu-4F1A7C2E-AAAA", gpus)).toMatchObject({ ok: true, gpu: { index: 0 } });
    expect(resolveGpuId("GPU-4f1b", gpus)).toMatchObject({ ok: true, gpu: { index: 1 } });
  });
  it("reports invisible and ambiguous ids", () => {
    expect(resolveGpuId("2", gpus)).toMatchObject({ ok: false, reason: "not-visible" });
    expect(resolveGpuId("GPU-dead", gpus)).toMatchObject({ ok: false, reason: "not-visible" });
    expect(resolveGpuId("GPU-4f1", gpus)).toMatchObject({ ok: false, reason: "ambiguous" });
  });
});
