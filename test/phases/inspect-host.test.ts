// Host probes against fixture trees, real child processes and real sockets.
import { createHash } from "node:crypto";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CancelledError, NarwhalError } from "../../src/errors.js";
import { checkDevices, declaredDevices } from "../../src/phases/host/devices.js";
import { modelConfigSha256 } from "../../src/phases/host/model-hash.js";
import { queryNvidiaGpus } from "../../src/phases/host/nvidia-smi.js";
import { NO_PCI_ACCELERATOR, scanPciAccelerators } from "../../src/phases/host/pci-scan.js";
import { checkPlannedPorts, portFree, portFreeEverywhere } from "../../src/phases/host/ports.js";
import { queryRocmGpus } from "../../src/phases/host/rocminfo.js";

const hosts = fileURLToPath(new URL("../fixtures/hosts/", import.meta.url));
const fixture = (...p: string[]) => path.join(hosts, ...p);
const tool = () => ({ signal: new AbortController().signal, timeoutMs: 10_000 });

function listen(host: string, port = 0): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen({ host, port }, () => resolve(s));
  });
}
const portOf = (s: net.Server) => (s.address() as net.AddressInfo).port;
const close = (s: net.Server) => new Promise<void>((r) => s.close(() => r()));

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(path.join(tmpdir(), "narwhal-inspect-host-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe("scanPciAccelerators", () => {
  it("finds two NVIDIA GPUs on h100x2 through sysfs-style symlinks, skipping NIC and bridges", async () => {
    const scan = await scanPciAccelerators(fixture("h100x2", "sys"));
    expect(scan.vendors).toEqual(["nvidia"]);
    expect(scan.accelerators.map((a) => a.address)).toEqual(["0000:18:00.0", "0000:2a:00.0"]);
  });

  it("finds two AMD processing accelerators (class 0x12) on mi300x", async () => {
    const scan = await scanPciAccelerators(fixture("mi300x", "sys"));
    expect(scan.vendors).toEqual(["amd"]);
    expect(scan.accelerators.map((a) => a.class)).toEqual(["0x120000", "0x120000"]);
  });

  it("fails with the seed's wording on nogpu and on a missing sysfs root", async () => {
    for (const root of [fixture("nogpu", "sys"), fixture("nowhere", "sys")]) {
      const err = await scanPciAccelerators(root).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NarwhalError);
      expect((err as NarwhalError).message).toContain(NO_PCI_ACCELERATOR);
      expect((err as NarwhalError).input).toBe("node.sysfs_root");
      expect((err as NarwhalError).retryable).toBe(false);
    }
  });
});

describe("GPU identity tools", () => {
  it("runs the fixture nvidia-smi and keeps its raw output", async () => {
    const r = await queryNvidiaGpus(fixture("h100x2", "bin", "nvidia-smi"), tool());
    expect(r.gpus.map((g) => g.name)).toEqual(["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]);
    expect(r.raw).toMatch(/^pci\.bus_id, name, uuid\n/);
  });

  it("runs the fixture rocminfo", async () => {
    const r = await queryRocmGpus(fixture("mi300x", "bin", "rocminfo"), tool());
    expect(r.gpus).toHaveLength(2);
    expect(r.raw).toContain("HSA Agents");
  });

  it("reports a missing tool as not retryable, naming the node field", async () => {
    const err = await queryNvidiaGpus(path.join(tmp, "no-such-nvidia-smi"), tool()).catch((e: unknown) => e);
    expect(err).toMatchObject({ retryable: false, input: "node.nvidia_smi" });
    expect((err as Error).message).toMatch(/cannot be executed \(ENOENT\)/);
  });

  it("reports a non-zero exit with the tool's own words", async () => {
    const script = path.join(tmp, "broken-smi");
    await writeFile(script, "#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\nexit 18\n");
    await chmod(script, 0o755);
    const err = await queryNvidiaGpus(script, tool()).catch((e: unknown) => e);
    expect(err).toMatchObject({ retryable: false });
    expect((err as Error).message).toMatch(/exit 18.*Driver\/library version mismatch/);
  });

  it("times out a hung tool as retryable, and cancels on abort", async () => {
    const script = path.join(tmp, "hung-rocminfo");
    await writeFile(script, "#!/bin/sh\nexec sleep 30\n");
    await chmod(script, 0o755);
    const timedOut = await queryRocmGpus(script, { signal: new AbortController().signal, timeoutMs: 200 }).catch(
      (e: unknown) => e,
    );
    expect(timedOut).toMatchObject({ retryable: true, input: "node.rocminfo" });
    expect((timedOut as Error).message).toMatch(/did not finish within 200 ms/);

    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const cancelled = await queryRocmGpus(script, { signal: ac.signal, timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(cancelled).toBeInstanceOf(CancelledError);
  });
});

describe("ports", () => {
  it("sees a real listener as busy and a closed port as free", async () => {
    const server = await listen("127.0.0.1");
    const port = portOf(server);
    expect(await portFree("127.0.0.1", port)).toBe(false);
    // A loopback-only listener still blocks a wildcard plan: any listener counts.
    expect(await portFreeEverywhere("0.0.0.0", port)).toBe(false);
    expect(await portFreeEverywhere("[::]", port)).toBe(false);
    await close(server);
    expect(await portFree("127.0.0.1", port)).toBe(true);
    expect(await portFreeEverywhere("127.0.0.1", port)).toBe(true);
  });

  it("handles IPv6 hosts written with URL brackets", async () => {
    const server = await listen("::1").catch(() => undefined);
    if (!server) return; // no IPv6 loopback in this environment
    expect(await portFree("[::1]", portOf(server))).toBe(false);
    expect(await portFreeEverywhere("127.0.0.1", portOf(server))).toBe(false);
    await close(server);
  });

  it("throws for an address that is not on this host instead of calling the port busy", async () => {
    const err = await portFree("192.0.2.77", 18555).catch((e: unknown) => e);
    expect(err).toMatchObject({ retryable: false });
    expect((err as Error).message).toMatch(/EADDRNOTAVAIL/);
  });

  it("checks planned ports, skipping ignored ones", async () => {
    const server = await listen("127.0.0.1");
    const port = portOf(server);
    const planned = [{ port, purpose: "http", input: "http_port" }];
    expect((await checkPlannedPorts("127.0.0.1", planned))[0]).toMatchObject({ port, free: false });
    expect((await checkPlannedPorts("127.0.0.1", planned, new Set([port])))[0]).toMatchObject({ port, free: true });
    await close(server);
  });
});

describe("devices and model hash", () => {
  it("looks for declared devices under node.dev_root", async () => {
    const devices = declaredDevices(["/dev/nvidia0", "/dev/nvidia7"], ["/dev/infiniband/uverbs0"]);
    const checks = await checkDevices(fixture("h100x2"), devices);
    expect(checks.map((c) => [c.path, c.present, c.input])).toEqual([
      ["/dev/nvidia0", true, "launch.accelerator_devices[0]"],
      ["/dev/nvidia7", false, "launch.accelerator_devices[1]"],
      ["/dev/infiniband/uverbs0", true, "launch.transfer.devices[0]"],
    ]);
  });

  it("hashes <model.dir>/config.json like sha256sum, and names model.dir when it is missing", async () => {
    const body = JSON.stringify({ model_type: "llama", hidden_size: 4096 });
    await writeFile(path.join(tmp, "config.json"), body);
    const ac = new AbortController();
    expect(await modelConfigSha256(tmp, ac.signal)).toBe(createHash("sha256").update(body).digest("hex"));
    const err = await modelConfigSha256(path.join(tmp, "absent"), ac.signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ retryable: false, input: "model.dir (NARWHAL_MODEL_DIR)" });
  });
});
