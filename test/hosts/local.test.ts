// LocalHost against real processes and files in a temp directory: the HostAccess
// contract, plus what only the local implementation does.
import { execFile } from "node:child_process";
import { constants as fsConstants } from "node:fs";
import fs from "node:fs/promises";
import { promisify } from "node:util";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalHost } from "../../src/hosts/local.js";
import { FileHelper } from "../../src/hosts/file-helper.js";
import { hostAccessContract, until, type ContractFixture } from "./contract.js";

const execFileP = promisify(execFile);

let dir = "";
let own = "";
const host = new LocalHost("local-test", { PATH: "/usr/local/bin:/usr/bin:/bin" });
// The same machine with `own` as the controller's own directory: its files are read in process (readWhole, fs).
let ownHost = host;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-local-host-"));
  own = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-local-own-"));
  ownHost = new LocalHost("local-test", { PATH: "/usr/local/bin:/usr/bin:/bin" }, { ownDirs: [own] });
});
afterAll(async () => {
  await host.close();
  await ownHost.close();
  await fs.rm(dir, { recursive: true, force: true });
  await fs.rm(own, { recursive: true, force: true });
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

// Files in a temp directory are an operator's files to LocalHost (a process reads them, under a deadline);
// in its own directory it reads them itself. Both keep the one contract.
hostAccessContract("LocalHost", () => ({ host, dir, listen: listen() }));
hostAccessContract("LocalHost in its own directory", () => ({ host: ownHost, dir: own, listen: listen() }));

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

/** This test process's children that are node (LocalHost's file helpers), but those in `besides`. */
async function nodeChildren(besides: number[] = []): Promise<number[]> {
  const out: number[] = [];
  for (const name of await fs.readdir("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await fs.readFile(`/proc/${name}/stat`, "utf8").catch(() => "");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const pid = Number(name);
    if (Number(fields[1]) === process.pid && stat.includes("(node)") && !besides.includes(pid)) out.push(pid);
  }
  return out;
}

describe("LocalHost reading a file whose filesystem does not answer", () => {
  // A FIFO with no writer: its open never returns, as a read on a hung NFS mount does not. In process, each such
  // read held one of libuv's four threads for good (and a process holding one cannot exit): five of them and no
  // file of the controller's was read again. Read by the file helper, each fails at its deadline and holds nothing.
  it("fails each read, stat and listing at its deadline, outwaited, naming the node and file, and holds no thread", async () => {
    const others = await nodeChildren(); // other hosts' helpers in this file
    const slow = new LocalHost("node-nfs", { PATH: "/usr/bin:/bin" }, { fileTimeoutMs: 600 });
    const fifos = await Promise.all(
      [1, 2, 3, 4, 5].map(async (i) => {
        const f = path.join(dir, `hung-${i}`);
        await execFileP("mkfifo", [f]);
        return f;
      }),
    );
    const readable = path.join(dir, "readable");
    await fs.writeFile(readable, "answers");
    // The five hung reads, and a good one asked behind them: it waits its turn, then answers.
    const failures = fifos.map((f) => slow.readFile(f).catch((err: unknown) => err));
    const good = slow.readFile(readable);
    const began = Date.now();
    const errs = await Promise.all(failures);
    expect((await good).toString()).toBe("answers");
    expect(Date.now() - began).toBeLessThan(20_000);
    errs.forEach((err, i) => {
      expect(err).toMatchObject({ failure: "outwait", input: "node node-nfs" });
      expect((err as Error).message).toBe(
        `node node-nfs: read '${fifos[i]}' did not finish within 0.6 s: the filesystem holding it does not answer`,
      );
    });
    // libuv's threads are all free: six reads of the controller's own at once, through them, answer.
    const mine = await Promise.all([1, 2, 3, 4, 5, 6].map(() => fs.readFile(readable, "utf8")));
    expect(mine.join()).toBe(Array(6).fill("answers").join());
    // Nothing is left waiting on the FIFOs (a writer's non-blocking open finds no reader), and after close no helper.
    for (const f of fifos) {
      const opened = await fs
        .open(f, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK)
        .catch((e: NodeJS.ErrnoException) => e.code);
      expect(opened).toBe("ENXIO");
    }
    await slow.close();
    await until("the helper to end", async () => (await nodeChildren(others)).length === 0);
  });

  it("reads the kernel's files and its own directory's in process, any other file by one helper, ended by close", async () => {
    const others = await nodeChildren(); // other hosts' helpers in this file
    const h = new LocalHost("local-test", { PATH: "/usr/bin:/bin" }, { ownDirs: [own] });
    await fs.writeFile(path.join(own, "mine"), "in process");
    await fs.writeFile(path.join(dir, "theirs"), "by the helper");
    expect((await h.readFile(path.join(own, "mine"))).toString()).toBe("in process");
    expect(await h.stat("/dev/null")).toMatchObject({ kind: "other" });
    expect((await h.readFile(`/proc/${process.pid}/status`)).toString()).toContain(`Pid:\t${process.pid}`);
    expect(await nodeChildren(others)).toEqual([]);
    expect((await h.readFile(path.join(dir, "theirs"))).toString()).toBe("by the helper");
    expect(await h.stat(path.join(dir, "theirs"))).toMatchObject({ kind: "file", size: 13 });
    expect(await h.readDir(dir)).toContain("theirs");
    await expect(h.readFile(path.join(dir, "absent"))).rejects.toMatchObject({
      code: "ENOENT",
      path: path.join(dir, "absent"),
    });
    const [helper] = await nodeChildren(others);
    expect(helper).toBeDefined();
    // A helper that ends by itself (killed from outside) is replaced at the next read.
    process.kill(helper!, "SIGKILL");
    await until("the helper to end", async () => (await nodeChildren(others)).length === 0);
    expect(await h.readDir(dir)).toContain("theirs");
    expect(await nodeChildren(others)).toHaveLength(1);
    await h.close();
    await until("the helper to end", async () => (await nodeChildren(others)).length === 0);
  });
});

describe("the file helper", () => {
  it("ends after its idle time, and the next read starts another", async () => {
    const others = await nodeChildren();
    const helper = new FileHelper(5_000, 300);
    await fs.writeFile(path.join(dir, "idle-read"), "once");
    expect((await helper.readFile("node-1", path.join(dir, "idle-read"), 100)).toString()).toBe("once");
    expect(await nodeChildren(others)).toHaveLength(1);
    await until("the idle helper to end", async () => (await nodeChildren(others)).length === 0);
    expect((await helper.readFile("node-1", path.join(dir, "idle-read"), 100)).toString()).toBe("once");
    expect(await helper.stat("node-1", path.join(dir, "idle-read"))).toMatchObject({ size: 4 });
    helper.close();
    await until("the helper to end", async () => (await nodeChildren(others)).length === 0);
  });
});

describe("LocalHost.readFile across its growing read sizes (4 KiB first, then up to 64 KiB)", () => {
  it.each([0, 1, 4096, 4097, 20_480, 65_536, 65_537, 300_001])("reads a file of %i bytes whole", async (size) => {
    const bytes = Buffer.alloc(size);
    for (let i = 0; i < size; i++) bytes[i] = (i * 31 + 7) % 256;
    for (const [h, where] of [
      [ownHost, own],
      [host, dir],
    ] as const) {
      const file = path.join(where, `sized-${size}`);
      await fs.writeFile(file, bytes);
      expect((await h.readFile(file)).equals(bytes)).toBe(true);
      if (size > 0) await expect(h.readFile(file, { maxBytes: size - 1 })).rejects.toMatchObject({ code: "EFBIG" });
    }
  });

  it("reads the boot id once per host object, and the value is the machine's", async () => {
    const fresh = new LocalHost("boot-test", {});
    const machine = (await fs.readFile("/proc/sys/kernel/random/boot_id", "utf8")).trim();
    const [a, b] = [fresh.bootId(), fresh.bootId()];
    expect(a).toBe(b);
    expect(await a).toBe(machine);
  });
});
