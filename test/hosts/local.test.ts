// LocalHost against real processes and files in a temp directory: the HostAccess
// contract, plus what only the local implementation does.
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalHost } from "../../src/hosts/local.js";
import { hostAccessContract, type ContractFixture } from "./contract.js";

let dir = "";
const host = new LocalHost("local-test", { PATH: "/usr/local/bin:/usr/bin:/bin" });

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-local-host-"));
});
afterAll(async () => {
  await host.close();
  await fs.rm(dir, { recursive: true, force: true });
});

function listen(): ContractFixture["listen"] {
  return () =>
    new Promise((resolve, reject) => {
      const server = net.createServer();
      server.once("error", reject);
      server.listen({ host: "127.0.0.1", port: 0 }, () =>
        resolve({
          port: (server.address() as net.AddressInfo).port,
          stop: () => new Promise<void>((r) => server.close(() => r())),
        }),
      );
    });
}

hostAccessContract("LocalHost", () => ({ host, dir, listen: listen() }));

describe("LocalHost", () => {
  it("starts commands from its base environment, not the controller's", async () => {
    const r = await host.run(["sh", "-c", 'printf "%s" "${HOME-unset}"']);
    expect(r.stdout).toBe("unset");
  });

  it("reads /proc files, which report size 0, whole", async () => {
    const text = (await host.readFile(`/proc/${process.pid}/status`)).toString();
    expect(text).toContain(`Pid:\t${process.pid}`);
  });
});

describe("LocalHost.readFile across its growing read sizes (4 KiB first, then up to 64 KiB)", () => {
  it.each([0, 1, 4096, 4097, 20_480, 65_536, 65_537, 300_001])("reads a file of %i bytes whole", async (size) => {
    const bytes = Buffer.alloc(size);
    for (let i = 0; i < size; i++) bytes[i] = (i * 31 + 7) % 256;
    const file = path.join(dir, `sized-${size}`);
    await fs.writeFile(file, bytes);
    expect((await host.readFile(file)).equals(bytes)).toBe(true);
    if (size > 0) await expect(host.readFile(file, { maxBytes: size - 1 })).rejects.toMatchObject({ code: "EFBIG" });
  });

  it("reads the boot id once per host object, and the value is the machine's", async () => {
    const fresh = new LocalHost("boot-test", {});
    const machine = (await fs.readFile("/proc/sys/kernel/random/boot_id", "utf8")).trim();
    const [a, b] = [fresh.bootId(), fresh.bootId()];
    expect(a).toBe(b);
    expect(await a).toBe(machine);
  });
});
