// Seed 001: the selected device resolves inside the checked runtime. The rules (resolveRuntimeDevice)
// on fixture device lists, and the runtime's own answer: inspect_runtime.py's cuda-devices query run by
// /usr/bin/python3 against the simulator's CUDA driver (test/sim/site), whose device order can differ
// from nvidia-smi's and which reads CUDA_VISIBLE_DEVICES as CUDA does.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../src/app.js";
import { resolveRuntimeDevice, type RuntimeDevices } from "../../src/phases/runtime-devices.js";

const A = "GPU-4f1a7c2e-8b3d-4e6f-9a0b-1c2d3e4f5a6b"; // nvidia-smi index 0 (bus 18:00.0)
const B = "GPU-9e8d7c6b-5a4f-4e2d-8c0b-a9f8e7d6c5b4"; // nvidia-smi index 1 (bus 2A:00.0)
const TWIN = "GPU-4f1a0000-0000-4000-8000-000000000000"; // shares the prefix GPU-4f1a with A

/** A runtime's answer: `order` is every device in its enumeration order, `visible` what the selection shows. */
function runtime(order: string[], visible: string[], selection: string, deviceOrder = "FASTEST_FIRST"): RuntimeDevices {
  const dev = (uuid: string, ordinal: number) => ({ ordinal, uuid });
  return {
    binding: "cuda.bindings.driver",
    visibility_env: "CUDA_VISIBLE_DEVICES",
    visible_devices: selection,
    cuda_device_order: deviceOrder,
    devices: order.map(dev),
    visible: visible.map(dev),
    inspection_id: "fixture",
  };
}

describe("resolveRuntimeDevice: the selected device in the runtime's enumeration", () => {
  it("numbers ordinals in the runtime's order: ordinal 1 is nvidia-smi's GPU 0 when the runtime lists B first", () => {
    const r = resolveRuntimeDevice("1", A, runtime([B, A], [A], "1"));
    expect(r).toMatchObject({
      ok: true,
      resolution: { selected: "1", ordinal: 1, uuid: A, devices: [{ uuid: B }, { uuid: A }] },
    });
  });

  it("refuses ordinal 0 that nvidia-smi would call A when the runtime's ordinal 0 is B, naming both", () => {
    const r = resolveRuntimeDevice("0", A, runtime([B, A], [B], "0"));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problem).toBe(
      `resolves to ${B} (runtime ordinal 0, CUDA_DEVICE_ORDER=FASTEST_FIRST; the runtime lists 0=${B}, 1=${A}), not shared_device.gpu_uuid ${A}`,
    );
    expect(r.fix).toContain(`select the GPU by its full UUID (GPU-…), which no device order renumbers (${A})`);
  });

  it("refuses an ordinal out of range with the runtime's count", () => {
    const r = resolveRuntimeDevice("2", A, runtime([A, B], [], "2"));
    expect(r).toMatchObject({ ok: false });
    expect(!r.ok && r.problem).toBe(
      `ordinal 2 is out of range: the runtime (CUDA_DEVICE_ORDER=FASTEST_FIRST) lists 2 device(s): 0=${A}, 1=${B}`,
    );
  });

  it("resolves an unambiguous UUID prefix and a full UUID in any case, whatever the order", () => {
    expect(resolveRuntimeDevice("GPU-4f1a", A, runtime([B, A], [A], "GPU-4f1a"))).toMatchObject({
      ok: true,
      resolution: { ordinal: 1, uuid: A },
    });
    expect(resolveRuntimeDevice(A.toUpperCase(), A, runtime([B, A], [A], A.toUpperCase()))).toMatchObject({
      ok: true,
      resolution: { uuid: A },
    });
  });

  it("refuses a prefix two devices share, naming both, and a UUID no device has", () => {
    const amb = resolveRuntimeDevice("GPU-4f1a", A, runtime([A, TWIN], [], "GPU-4f1a"));
    expect(!amb.ok && amb.problem).toBe(
      `UUID prefix GPU-4f1a is ambiguous: it matches ${A} and ${TWIN} in the runtime`,
    );
    const none = resolveRuntimeDevice("GPU-0000", A, runtime([A, B], [], "GPU-0000"));
    expect(!none.ok && none.problem).toBe(`no device the runtime lists has UUID GPU-0000 (0=${A}, 1=${B})`);
  });

  it("refuses when the runtime's own visible device is not the one its listing gives the ordinal", () => {
    const r = resolveRuntimeDevice("0", A, runtime([A, B], [B], "0"));
    expect(!r.ok && r.problem).toBe(
      `resolves to ${A} in the runtime's order (CUDA_DEVICE_ORDER=FASTEST_FIRST), but with CUDA_VISIBLE_DEVICES=0 the runtime itself makes 0=${B} visible`,
    );
    // A prefix without "GPU-" names no device, in narwhal's rules as in CUDA.
    const bare = resolveRuntimeDevice("4f1a", A, runtime([A, B], [], "4f1a"));
    expect(!bare.ok && bare.problem).toBe(`no device the runtime lists has UUID 4f1a (0=${A}, 1=${B})`);
  });
});

describe("inspect_runtime.py cuda-devices against the simulator's CUDA driver", () => {
  let dir = "";
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "narwhal-cuda-devices-"));
    await writeFile(path.join(dir, "in.json"), JSON.stringify({ mode: "cuda-devices" }));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  async function query(env: Record<string, string>): Promise<RuntimeDevices> {
    const { stdout } = await promisify(execFile)(
      "/usr/bin/python3",
      [path.join(packageRoot(), "src/phases/inspect_runtime.py"), path.join(dir, "in.json")],
      { env: { PATH: "/usr/bin:/bin", PYTHONPATH: path.join(packageRoot(), "test/sim/site"), ...env } },
    );
    const line = stdout.trimEnd().split("\n").at(-1)!;
    return (JSON.parse(line.slice("NARWHAL_INSPECT_RESULT ".length)) as { result: RuntimeDevices }).result;
  }
  const uuids = (d: Array<{ uuid: string }>) => d.map((x) => x.uuid);

  it("lists nvidia-smi's PCI order by default, and the FASTEST_FIRST order the simulator is given", async () => {
    expect(uuids((await query({ CUDA_VISIBLE_DEVICES: "0" })).devices)).toEqual([A, B]);
    const fast = await query({ CUDA_VISIBLE_DEVICES: "0", NARWHAL_SIM_CUDA_FASTEST_FIRST: "1,0" });
    expect(fast).toMatchObject({ cuda_device_order: "FASTEST_FIRST", visible_devices: "0" });
    expect(uuids(fast.devices)).toEqual([B, A]);
    expect(uuids(fast.visible)).toEqual([B]);
  });

  it("honours CUDA_DEVICE_ORDER=PCI_BUS_ID over the fastest-first order", async () => {
    const pci = await query({
      CUDA_VISIBLE_DEVICES: "0",
      CUDA_DEVICE_ORDER: "PCI_BUS_ID",
      NARWHAL_SIM_CUDA_FASTEST_FIRST: "1,0",
    });
    expect(uuids(pci.devices)).toEqual([A, B]);
    expect(uuids(pci.visible)).toEqual([A]);
  });

  it("reads CUDA_VISIBLE_DEVICES as CUDA does: UUID prefixes, a list ending at an ambiguous or unknown entry, duplicates hide all", async () => {
    const order = { NARWHAL_SIM_CUDA_FASTEST_FIRST: "1,0" };
    expect(uuids((await query({ ...order, CUDA_VISIBLE_DEVICES: "GPU-4f1a,0" })).visible)).toEqual([A, B]);
    expect(uuids((await query({ ...order, CUDA_VISIBLE_DEVICES: "1,GPU-,0" })).visible)).toEqual([A]);
    expect(uuids((await query({ ...order, CUDA_VISIBLE_DEVICES: "1,7,0" })).visible)).toEqual([A]);
    expect(uuids((await query({ ...order, CUDA_VISIBLE_DEVICES: "4f1a" })).visible)).toEqual([]);
    expect(uuids((await query({ ...order, CUDA_VISIBLE_DEVICES: "0,GPU-9e8d" })).visible)).toEqual([]);
    // Every device is listed whatever the selection (the variable is removed for that listing).
    expect(uuids((await query({ ...order, CUDA_VISIBLE_DEVICES: "" })).devices)).toEqual([B, A]);
  });
});
