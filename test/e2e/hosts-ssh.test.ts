// SshHost against a real sshd on a rig host (test/rig: a network namespace with
// its own address and sshd, reached only over SSH): the HostAccess contract
// (the same body LocalHost passes in test/hosts/local.test.ts), one multiplexed
// master connection per node, and the faults a fleet meets: a stopped sshd is
// NodeUnreachable and the node is used again when it is back; a changed host
// key is refused, terminally, and nothing runs there.
import { execFile, type ChildProcess } from "node:child_process";
import { promisify } from "node:util";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HostKeyRejected, NodeUnreachable } from "../../src/errors.js";
import { LocalHost } from "../../src/hosts/local.js";
import { SshHost } from "../../src/hosts/ssh.js";
import { hostAccessContract, type ContractFixture } from "../hosts/contract.js";
import { createRig, type Rig, type RigHost } from "../rig/rig.js";
import { RIG_CLIENT_ENV, rigSshHost } from "../rig/ssh-host.js";

let rig: Rig;
let a: RigHost;
let stateDir = "";
let dir = "";
let host: SshHost;
const CLIENT_ENV = RIG_CLIENT_ENV;
/** Every temp directory a test made, removed at the end. */
const temps: string[] = [];

async function tempDir(prefix: string): Promise<string> {
  const made = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  temps.push(made);
  return made;
}

const sshHostFor = rigSshHost;
const execFileP = promisify(execFile);

/** A TCP listener inside the rig host's namespace only; resolves once it printed its port. */
function listenOnNode(h: RigHost): ContractFixture["listen"] {
  return () =>
    new Promise((resolve, reject) => {
      const py = [
        "import socket, time",
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()",
        "print(s.getsockname()[1], flush=True)",
        "time.sleep(600)",
      ].join("\n");
      const child: ChildProcess = h.spawnIn(["python3", "-c", py]);
      child.once("error", reject);
      child.stdout!.once("data", (d: Buffer) =>
        resolve({
          port: Number(d.toString().trim()),
          stop: () =>
            new Promise<void>((r) => {
              child.once("exit", () => r());
              child.kill("SIGKILL");
            }),
        }),
      );
    });
}

/** Successful logins sshd logged so far on a rig host. */
async function loginsOn(h: RigHost): Promise<number> {
  const log = await fs.readFile(path.join(rig.dir, h.name, "sshd.log"), "utf8");
  return log.split("\n").filter((l) => l.includes("Accepted publickey")).length;
}

beforeAll(async () => {
  rig = await createRig({ hosts: 1 });
  a = rig.hosts[0]!;
  stateDir = await tempDir("nw-hs-");
  dir = await tempDir("nw-hs-node-");
  host = sshHostFor(a, stateDir);
});
afterAll(async () => {
  await host?.close();
  await rig?.teardown();
  for (const t of temps) await fs.rm(t, { recursive: true, force: true });
});

hostAccessContract("SshHost on a rig host", () => ({ host, dir, listen: listenOnNode(a) }));

describe("SshHost on a rig host", () => {
  it("reads the node, not the controller's machine: a listener only in the node's namespace", async () => {
    const l = await listenOnNode(a)();
    try {
      expect(await host.listeners()).toContainEqual({ address: "127.0.0.1", port: l.port });
      const local = await new LocalHost("controller", CLIENT_ENV).listeners();
      expect(local).not.toContainEqual({ address: "127.0.0.1", port: l.port });
    } finally {
      await l.stop();
    }
  });

  it("holds one master connection for many commands: one socket, one login", async () => {
    const state = await tempDir("nw-hs-mux-");
    const fresh = sshHostFor(a, state);
    const before = await loginsOn(a);
    try {
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => fresh.run(["echo", String(i)])));
      expect(results.map((r) => r.stdout)).toEqual(Array.from({ length: 8 }, (_, i) => `${i}\n`));
      for (let i = 0; i < 4; i++) expect((await fresh.run(["true"])).code).toBe(0);
      expect(await loginsOn(a)).toBe(before + 1);
      expect(await fs.readdir(path.join(state, "ssh"))).toHaveLength(1);
    } finally {
      await fresh.close();
    }
  });

  it("runs 24 commands at once on one node, all of them: sessions on its one master stay under sshd's MaxSessions (10)", async () => {
    const state = await tempDir("nw-hs-many-");
    const fresh = sshHostFor(a, state);
    const before = await loginsOn(a);
    try {
      // Each holds its session for a while, so all 24 would be open together without the cap; a
      // session the master is refused makes ssh log in on its own, where sshd's MaxStartups drops some.
      const results = await Promise.all(
        Array.from({ length: 24 }, (_, i) => fresh.run(["sh", "-c", `sleep 0.3; echo ${i}`])),
      );
      expect(results.map((r) => r.stdout)).toEqual(Array.from({ length: 24 }, (_, i) => `${i}\n`));
      expect(await loginsOn(a)).toBe(before + 1);
      expect(await fs.readdir(path.join(state, "ssh"))).toHaveLength(1);
    } finally {
      await fresh.close();
    }
  });

  it("a read the node's filesystem never answers fails at the file deadline, naming node and file (outwait), and ends there", async () => {
    // A FIFO with no writer: the remote read's open never returns, as on an NFS mount whose server went away.
    const fifo = path.join(await tempDir("nw-hs-hung-"), "config.json");
    await execFileP("mkfifo", [fifo]);
    const fresh = sshHostFor(a, await tempDir("nw-hs-hung-state-"), { fileTimeoutMs: 1500 });
    try {
      const began = Date.now();
      const err: unknown = await fresh.readFile(fifo).catch((e: unknown) => e);
      expect(Date.now() - began).toBeLessThan(15_000);
      expect(err).toMatchObject({ failure: "outwait", retryable: true, input: `node ${a.name}` });
      expect((err as Error).message).toBe(
        `node ${a.name}: read '${fifo}' did not finish within 1.5 s: the filesystem holding it does not answer`,
      );
      // The blocked read on the node was ended with its session (its process group), not left waiting there.
      const readers = async () => (await execFileP("pgrep", ["-f", fifo]).catch(() => ({ stdout: "" }))).stdout.trim();
      for (let i = 0; (await readers()) !== "" && i < 100; i++) await new Promise((r) => setTimeout(r, 100));
      expect(await readers()).toBe("");
      expect((await fresh.run(["true"])).code).toBe(0); // the node is used again
    } finally {
      await fresh.close();
    }
  });

  it("ends the master on close", async () => {
    const state = await tempDir("nw-hs-close-");
    const fresh = sshHostFor(a, state);
    await fresh.run(["true"]);
    expect(await fs.readdir(path.join(state, "ssh"))).toHaveLength(1);
    await fresh.close();
    expect(await fs.readdir(path.join(state, "ssh"))).toHaveLength(0);
  });

  it("a stopped sshd is NodeUnreachable (outwait), and the node is used again once sshd is back", async () => {
    const fresh = sshHostFor(a, await tempDir("nw-hs-down-"));
    await a.stopSshd();
    try {
      const err: unknown = await fresh.run(["true"]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NodeUnreachable);
      expect(err).toMatchObject({ node: a.name, reason: "unreachable", failure: "outwait" });
      expect((err as Error).message).toContain("Connection refused");
    } finally {
      await a.startSshd();
    }
    expect((await fresh.run(["echo", "back"])).stdout).toBe("back\n");
    await fresh.close();
  });

  it("a changed host key is refused, terminally, naming node, known_hosts and fix; nothing runs there", async () => {
    await host.close();
    await a.rotateHostKey();
    const marker = path.join(dir, "must-not-exist");
    const fresh = sshHostFor(a, await tempDir("nw-hs-key-"));
    const err: unknown = await fresh.run(["touch", marker]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HostKeyRejected);
    expect(err).toMatchObject({ node: a.name, reason: "host-key", retryable: false, failure: "terminal" });
    const e = err as HostKeyRejected;
    expect(e.message).toContain(a.ssh.known_hosts_file);
    expect(e.fix).toMatch(/out of band.*ssh-keyscan/);
    await expect(fs.stat(marker)).rejects.toMatchObject({ code: "ENOENT" });
  });
});
