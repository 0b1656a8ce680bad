// What OpenSSH's exit 255 means. The stderr below was printed by OpenSSH 9.2p1
// (Debian 12) itself: against 127.0.0.1 ports with nothing listening, a listener
// that never speaks or resets, an sshd whose host key was not or no longer in
// known_hosts, a key sshd does not accept, an unresolvable name, and from a
// network namespace with no route / an unanswered ARP. The live cases at the end
// run the real client through SshHost against loopback listeners made here.
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HostKeyRejected, NodeAccessError, NodeAuthFailed, NodeUnreachable } from "../../src/errors.js";
import { classifySshFailure, sshConnectionError, type SshTarget } from "../../src/hosts/ssh-errors.js";
import { SshHost } from "../../src/hosts/ssh.js";

const target: SshTarget = {
  node: "gpu-b",
  destination: "narwhal@10.20.0.12",
  port: 22,
  knownHostsFile: "/srv/narwhal/known_hosts",
  identityFile: "/srv/narwhal/id_ed25519",
};

const CHANGED = `@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Someone could be eavesdropping on you right now (man-in-the-middle attack)!
It is also possible that a host key has just been changed.
The fingerprint for the ED25519 key sent by the remote host is
SHA256:saplHq0lyi6BIxQorhQApoCHMwuoZ71nniCGDrOHHkw.
Please contact your system administrator.
Add correct host key in /tmp/hosts-sshlab/known_hosts_changed to get rid of this message.
Offending ED25519 key in /tmp/hosts-sshlab/known_hosts_changed:1
  remove with:
  ssh-keygen -f "/tmp/hosts-sshlab/known_hosts_changed" -R "[127.0.0.1]:42222"
Host key for [127.0.0.1]:42222 has changed and you have requested strict checking.
Host key verification failed.
`;

const TABLE: Array<[string, string, typeof NodeUnreachable | typeof HostKeyRejected | typeof NodeAuthFailed]> = [
  ["changed host key", CHANGED, HostKeyRejected],
  [
    "unknown host key",
    "No ED25519 host key is known for [127.0.0.1]:42222 and you have requested strict checking.\nHost key verification failed.\n",
    HostKeyRejected,
  ],
  ["key refused", "root@127.0.0.1: Permission denied (publickey).\n", NodeAuthFailed],
  ["connection refused", "ssh: connect to host 127.0.0.1 port 42223: Connection refused\n", NodeUnreachable],
  ["refused over IPv6", "ssh: connect to host ::1 port 42222: Connection refused\n", NodeUnreachable],
  ["SYN unanswered", "ssh: connect to host 10.98.0.5 port 22: Connection timed out\n", NodeUnreachable],
  ["no ARP answer", "ssh: connect to host 10.98.0.5 port 22: No route to host\n", NodeUnreachable],
  ["no route", "ssh: connect to host 10.99.0.5 port 22: Network is unreachable\n", NodeUnreachable],
  [
    "name not known",
    "ssh: Could not resolve hostname no-such-host.invalid: Name or service not known\n",
    NodeUnreachable,
  ],
  [
    "silent listener",
    "Connection timed out during banner exchange\nConnection to 127.0.0.1 port 42224 timed out\n",
    NodeUnreachable,
  ],
  [
    "listener that resets",
    "kex_exchange_identification: read: Connection reset by peer\nConnection reset by 127.0.0.1 port 42225\n",
    NodeUnreachable,
  ],
  ["sshd gone mid-command", "Connection to 127.0.0.1 closed by remote host.\n", NodeUnreachable],
];

describe("classifySshFailure", () => {
  for (const [what, stderr, cls] of TABLE) {
    it(`${what} → ${cls.name}`, () => {
      const err = classifySshFailure(stderr, target);
      expect(err).toBeInstanceOf(cls);
      expect(err!.failure).toBe(cls === NodeUnreachable ? "outwait" : "terminal");
      expect(err!.message).toContain("node gpu-b");
      expect(err!.message).toContain("narwhal@10.20.0.12");
    });
  }

  it("names the known_hosts file and the out-of-band fix for a host key", () => {
    const err = classifySshFailure(CHANGED, target)!;
    expect(err).toMatchObject({ node: "gpu-b", reason: "host-key", retryable: false });
    expect(err.describe()).toContain("/srv/narwhal/known_hosts");
    expect(err.fix).toMatch(/out of band.*ssh-keygen -f \/srv\/narwhal\/known_hosts -R.*ssh-keyscan/);
  });

  it("names the identity file and authorized_keys for a refused key", () => {
    const err = classifySshFailure("root@127.0.0.1: Permission denied (publickey).\n", target)!;
    expect(err).toMatchObject({ reason: "auth", input: "node gpu-b ssh.identity_file /srv/narwhal/id_ed25519" });
    expect(err.fix).toContain("authorized_keys");
  });

  it("is null for a remote command's own stderr: its exit 255 is its own", () => {
    expect(classifySshFailure("Traceback (most recent call last):\nValueError: bad\n", target)).toBeNull();
    expect(classifySshFailure("", target)).toBeNull();
  });
});

describe("sshConnectionError", () => {
  // Printed by `ssh -o NoSuchOption=1 x@127.0.0.1 true` (exit 255): ssh's, but in no table.
  const unknown = "command-line: line 0: Bad configuration option: nosuchoption\n";

  it("takes any exit 255 before the command started as ssh's own, retryable, with ssh's words", () => {
    const err = sshConnectionError({ code: 255, stderr: unknown }, target, false)!;
    expect(err).toBeInstanceOf(NodeAccessError);
    expect(err).toMatchObject({ node: "gpu-b", reason: "unreachable", failure: "retry" });
    expect(err.message).toContain("Bad configuration option: nosuchoption");
  });

  it("leaves a started command's exit 255 to the command, unless ssh says the connection dropped", () => {
    expect(sshConnectionError({ code: 255, stderr: unknown }, target, true)).toBeNull();
    const dropped = "Connection to 127.0.0.1 closed by remote host.\n";
    expect(sshConnectionError({ code: 255, stderr: dropped }, target, true)).toBeInstanceOf(NodeUnreachable);
  });

  it("is null for any other exit", () => {
    expect(sshConnectionError({ code: 1, stderr: "Connection refused" }, target, false)).toBeNull();
    expect(sshConnectionError({ code: null, stderr: "" }, target, false)).toBeNull();
  });
});

describe("SshHost against what listens on loopback (the real ssh client)", () => {
  let dir = "";
  const servers: net.Server[] = [];
  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-ssh-errors-"));
  });
  afterAll(async () => {
    for (const s of servers) s.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  /** A loopback port: closed (nothing listens), silent (accepts, never speaks) or resetting. */
  async function port(kind: "closed" | "silent" | "reset"): Promise<number> {
    const server = net.createServer((socket) => {
      if (kind === "reset") socket.resetAndDestroy();
    });
    await new Promise<void>((r) => server.listen({ host: "127.0.0.1", port: 0 }, r));
    const p = (server.address() as net.AddressInfo).port;
    if (kind === "closed") await new Promise((r) => server.close(r));
    else servers.push(server);
    return p;
  }

  function hostAt(p: number): SshHost {
    return new SshHost({
      node: "loop",
      destination: "narwhal@127.0.0.1",
      port: p,
      knownHostsFile: path.join(dir, "known_hosts"),
      stateDir: dir,
      connectTimeoutS: 2,
      clientEnv: { PATH: "/usr/bin:/bin" },
    });
  }

  for (const kind of ["closed", "silent", "reset"] as const) {
    it(`a ${kind} port is NodeUnreachable, naming the node and the port`, async () => {
      const p = await port(kind);
      const err: unknown = await hostAt(p)
        .run(["true"])
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NodeUnreachable);
      expect((err as NodeUnreachable).message).toContain(`node loop: cannot reach narwhal@127.0.0.1 port ${p}`);
      expect((err as NodeUnreachable).failure).toBe("outwait");
    });
  }

  it("keeps the control socket directory private (0700) under the state directory", async () => {
    await hostAt(await port("closed"))
      .run(["true"])
      .catch(() => undefined);
    expect((await fs.stat(path.join(dir, "ssh"))).mode & 0o777).toBe(0o700);
  });

  it("refuses a state directory whose control socket path would not fit a Unix socket", () => {
    expect(
      () =>
        new SshHost({
          node: "long",
          destination: "x@y",
          stateDir: "/" + "d".repeat(60),
          clientEnv: {},
        }),
    ).toThrow(/longer than 49 bytes \(a Unix socket path holds 108\)/);
  });
});
