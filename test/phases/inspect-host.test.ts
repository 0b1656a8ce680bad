// Host probes against fixture trees, real child processes and real sockets.
import { createHash } from "node:crypto";
import { execFileSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CancelledError, IoError, NarwhalError } from "../../src/errors.js";
import { checkDevices, declaredDevices } from "../../src/phases/host/devices.js";
import { fileSha256OnNode, modelConfigSha256 } from "../../src/phases/host/model-hash.js";
import { queryNvidiaGpus } from "../../src/phases/host/nvidia-smi.js";
import { NO_PCI_ACCELERATOR, scanPciAccelerators } from "../../src/phases/host/pci-scan.js";
import { checkPlannedPorts, portFree, portFreeEverywhere } from "../../src/phases/host/ports.js";
import { queryRocmGpus } from "../../src/phases/host/rocminfo.js";
import { BIND_TEST_PY } from "../../src/phases/host/bind-test.js";
import { freePorts } from "../e2e/sim-fleet.js";
import { LocalHost } from "../../src/hosts/local.js";

// Fixture trees and tools on this machine: every probe reads them through the local host, as for a local node.
const host = new LocalHost("local-test", { PATH: "/usr/local/bin:/usr/bin:/bin" });

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
    const scan = await scanPciAccelerators(host, fixture("h100x2", "sys"));
    expect(scan.vendors).toEqual(["nvidia"]);
    expect(scan.accelerators.map((a) => a.address)).toEqual(["0000:18:00.0", "0000:2a:00.0"]);
  });

  it("finds two AMD processing accelerators (class 0x12) on mi300x", async () => {
    const scan = await scanPciAccelerators(host, fixture("mi300x", "sys"));
    expect(scan.vendors).toEqual(["amd"]);
    expect(scan.accelerators.map((a) => a.class)).toEqual(["0x120000", "0x120000"]);
  });

  it("reads every device in the one sh process, with no tool on PATH, a last line without newline included", async () => {
    // No PATH at all: a walk that ran `cat` (two processes per device) would read nothing here.
    const bare = new LocalHost("bare", { PATH: "/nonexistent" });
    const devices = path.join(tmp, "pci-bare", "bus", "pci", "devices");
    const device = async (address: string, cls: string, vendor: string) => {
      await mkdir(path.join(devices, address), { recursive: true });
      await writeFile(path.join(devices, address, "class"), cls);
      await writeFile(path.join(devices, address, "vendor"), vendor);
    };
    await device("0000:18:00.0", "0x030200\n", "0x10de\n");
    await device("0000:2a:00.0", "0x030200", "0x10de"); // no trailing newline
    await device("0000:17:01.0", "0x020000\n", "0x15b3\n"); // a NIC: read, not an accelerator
    const scan = await scanPciAccelerators(bare, path.join(tmp, "pci-bare"));
    expect(scan.accelerators).toEqual([
      { address: "0000:18:00.0", class: "0x030200", vendor: "0x10de", gpu_vendor: "nvidia" },
      { address: "0000:2a:00.0", class: "0x030200", vendor: "0x10de", gpu_vendor: "nvidia" },
    ]);
  });

  it("fails with the seed's wording on nogpu and on a missing sysfs root", async () => {
    for (const root of [fixture("nogpu", "sys"), fixture("nowhere", "sys")]) {
      const err = await scanPciAccelerators(host, root).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NarwhalError);
      expect((err as NarwhalError).message).toContain(NO_PCI_ACCELERATOR);
      expect((err as NarwhalError).input).toBe("node.sysfs_root");
      expect((err as NarwhalError).retryable).toBe(false);
    }
  });
});

describe("GPU identity tools", () => {
  it("runs the fixture nvidia-smi and keeps its raw output", async () => {
    const r = await queryNvidiaGpus(host, fixture("h100x2", "bin", "nvidia-smi"), tool());
    expect(r.gpus.map((g) => g.name)).toEqual(["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]);
    expect(r.raw).toMatch(/^pci\.bus_id, name, uuid\n/);
  });

  it("runs the fixture rocminfo", async () => {
    const r = await queryRocmGpus(host, fixture("mi300x", "bin", "rocminfo"), tool());
    expect(r.gpus).toHaveLength(2);
    expect(r.raw).toContain("HSA Agents");
  });

  it("reports a missing tool as not retryable, naming the node field", async () => {
    const err = await queryNvidiaGpus(host, path.join(tmp, "no-such-nvidia-smi"), tool()).catch((e: unknown) => e);
    expect(err).toMatchObject({ retryable: false, input: "node.nvidia_smi" });
    expect((err as Error).message).toMatch(/cannot be executed on node local-test \(ENOENT\)/);
  });

  it("reports a non-zero exit with the tool's own words", async () => {
    const script = path.join(tmp, "broken-smi");
    await writeFile(script, "#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\nexit 18\n");
    await chmod(script, 0o755);
    const err = await queryNvidiaGpus(host, script, tool()).catch((e: unknown) => e);
    expect(err).toMatchObject({ retryable: false });
    expect((err as Error).message).toMatch(/exit 18.*Driver\/library version mismatch/);
  });

  it("times out a hung tool as retryable, and cancels on abort", async () => {
    const script = path.join(tmp, "hung-rocminfo");
    await writeFile(script, "#!/bin/sh\nexec sleep 30\n");
    await chmod(script, 0o755);
    const timedOut = await queryRocmGpus(host, script, { signal: new AbortController().signal, timeoutMs: 200 }).catch(
      (e: unknown) => e,
    );
    expect(timedOut).toMatchObject({ retryable: true, input: "node.rocminfo" });
    expect((timedOut as Error).message).toMatch(/did not finish within 200 ms/);

    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const cancelled = await queryRocmGpus(host, script, { signal: ac.signal, timeoutMs: 10_000 }).catch(
      (e: unknown) => e,
    );
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
    expect((await checkPlannedPorts(host, "127.0.0.1", planned))[0]).toMatchObject({ port, free: false });
    expect((await checkPlannedPorts(host, "127.0.0.1", planned, new Set([port])))[0]).toMatchObject({
      port,
      free: true,
    });
    await close(server);
  });
});

describe("ports on the node: its listener table and a bind test", () => {
  /** A local host whose `ss` is a stand-in printing one listener line for `port` (ss -Hltn's shape). */
  async function hostWithSsListener(port: number): Promise<LocalHost> {
    const bin = path.join(tmp, `ss-bin-${port}`);
    await mkdir(bin, { recursive: true });
    await writeFile(path.join(bin, "ss"), `#!/bin/sh\necho "LISTEN 0 128 10.9.9.9:${port} 0.0.0.0:*"\n`);
    await chmod(path.join(bin, "ss"), 0o755);
    return new LocalHost("ss-node", { PATH: `${bin}:/usr/local/bin:/usr/bin:/bin` });
  }

  it("counts a listener the node's ss lists as busy even when the bind test finds the port free", async () => {
    const [port = 0] = await freePorts(1);
    const planned = [{ port, purpose: "http", input: "http_port" }];
    expect((await checkPlannedPorts(host, "127.0.0.1", planned))[0]).toMatchObject({ port, free: true });
    const listed = await hostWithSsListener(port);
    expect((await checkPlannedPorts(listed, "127.0.0.1", planned))[0]).toMatchObject({ port, free: false });
  });

  it("names the node and the fix when the planned address is not on the node", async () => {
    const planned = [{ port: 18101, purpose: "http", input: "http_port" }];
    const [r] = await checkPlannedPorts(host, "192.0.2.77", planned);
    expect(r).toMatchObject({ free: false });
    expect(r!.error!.message).toBe("cannot bind 192.0.2.77:18101 (EADDRNOTAVAIL) on node local-test");
    expect(r!.error!.fix).toBe("Configure 192.0.2.77 on node local-test or correct the engine URL's host.");
  });

  it("fails as a whole, naming iproute2, when the node has no ss", async () => {
    const bare = new LocalHost("bare-node", { PATH: path.join(tmp, "empty-path") });
    const err = await checkPlannedPorts(bare, "127.0.0.1", [{ port: 1, purpose: "http", input: "http_port" }]).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ retryable: false, fix: "Install iproute2 (ss) on the node." });
    expect((err as Error).message).toMatch(/ss -Hltn on node bare-node failed \(exit 127\)/);
  });

  it("the remote bind test (python3, one process) says free, EADDRINUSE or the errno per port", async () => {
    const server = await listen("127.0.0.1");
    const [free = 0] = await freePorts(1);
    const run = (host: string, ...ports: number[]) =>
      execFileSync("python3", ["-c", BIND_TEST_PY, host, ...ports.map(String)], { encoding: "utf8" });
    try {
      expect(run("127.0.0.1", portOf(server), free)).toBe(`${portOf(server)} EADDRINUSE\n${free} free\n`);
      // A loopback listener blocks a wildcard plan too: the dual-stack "::" bind collides with it.
      expect(run("0.0.0.0", portOf(server))).toBe(`${portOf(server)} EADDRINUSE\n`);
      expect(run("192.0.2.77", free)).toBe(`${free} EADDRNOTAVAIL\n`);
    } finally {
      await close(server);
    }
  });
});

describe("devices and model hash", () => {
  it("looks for declared devices under node.dev_root", async () => {
    const devices = declaredDevices(["/dev/nvidia0", "/dev/nvidia7"], ["/dev/infiniband/uverbs0"]);
    const checks = await checkDevices(host, fixture("h100x2"), devices);
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
    expect(await modelConfigSha256(host, tmp, ac.signal)).toBe(createHash("sha256").update(body).digest("hex"));
    const err = await modelConfigSha256(host, path.join(tmp, "absent"), ac.signal).catch((e: unknown) => e);
    expect(err).toMatchObject({ retryable: false, input: "model.dir (NARWHAL_MODEL_DIR)" });
    expect((err as Error).message).toContain("cannot be read on node local-test (ENOENT)");
  });

  it("hashes a large file on the node with sha256sum, keeping the file's errno", async () => {
    const file = path.join(tmp, "model.Q8_0.gguf");
    const body = Buffer.alloc(3 * 1024 * 1024, 7);
    await writeFile(file, body);
    const ac = new AbortController();
    expect(await fileSha256OnNode(host, file, ac.signal)).toBe(createHash("sha256").update(body).digest("hex"));
    const err = await fileSha256OnNode(host, path.join(tmp, "absent.gguf"), ac.signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IoError);
    expect(err).toMatchObject({ code: "ENOENT", path: path.join(tmp, "absent.gguf") });
  });
});
