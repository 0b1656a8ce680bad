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
