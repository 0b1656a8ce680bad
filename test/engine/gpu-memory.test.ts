// nvidia-smi memory readings (`--query-gpu=uuid,memory.total,memory.used
// --format=csv,noheader,nounits`) and the simulator's stateful stand-in.
import { describe, expect, it } from "vitest";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gpuByUuid, parseGpuMemoryCsv, readGpuMemory } from "../../src/phases/gpu-memory.js";
import { LocalHost } from "../../src/hosts/local.js";

const STAND_IN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../sim/bin/nvidia-smi");

describe("GPU memory readings", () => {
  it("parses one uuid, total, used line per GPU in index order", () => {
    const gpus = parseGpuMemoryCsv("GPU-aaa, 81559, 4\nGPU-bbb, 81559, 16311\n");
    expect(gpus).toEqual([
      { index: 0, uuid: "GPU-aaa", total_mib: 81559, used_mib: 4 },
      { index: 1, uuid: "GPU-bbb", total_mib: 81559, used_mib: 16311 },
    ]);
  });

  it("refuses output that is not the query's shape", () => {
    expect(() => parseGpuMemoryCsv("GPU-aaa, 81559 MiB, 4 MiB\n")).toThrow(/uuid, total MiB, used MiB/);
    expect(() => parseGpuMemoryCsv("uuid, memory.total [MiB], memory.used [MiB]\n")).toThrow(
      /not "uuid, total MiB, used MiB"/,
    );
  });

  it("reads the simulator's nvidia-smi, which counts nothing outside its pool", async () => {
    const reading = await readGpuMemory(
      new LocalHost("local-test", { PATH: "/usr/local/bin:/usr/bin:/bin" }),
      STAND_IN,
      { signal: new AbortController().signal, timeoutMs: 10_000 },
    );
    expect(reading.gpus.map((g) => g.uuid)).toEqual([
      "GPU-4f1a7c2e-8b3d-4e6f-9a0b-1c2d3e4f5a6b",
      "GPU-9e8d7c6b-5a4f-4e2d-8c0b-a9f8e7d6c5b4",
    ]);
    expect(gpuByUuid(reading, "gpu-9E8D7C6B-5a4f-4e2d-8c0b-a9f8e7d6c5b4")).toMatchObject({
      index: 1,
      total_mib: 81559,
    });
  });
});
