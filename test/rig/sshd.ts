// One sshd per rig host, inside the host's network namespace and its own UTS and
// mount namespaces (`hostname` over ssh names the host; /root is the host's own),
// listening only on the host's address. Keys and config live in the rig dir; readiness is the pid file and
// then a successful `ssh -o BatchMode=yes … true`.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, openSync, closeSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { processExists } from "../../src/backends/proc.js";
import { run, runOk, type RunResult } from "./run.js";

export const SSHD = "/usr/sbin/sshd";
const READY_TIMEOUT_MS = 15_000;

/**
 * Install Debian's openssh-server when sshd is missing, without letting the package start the
 * system sshd (policy-rc.d exit 101 tells invoke-rc.d not to): no sshd on the root namespace's
 * port 22. Asynchronous: apt-get may wait minutes for the dpkg lock.
 */
export async function ensureSshd(): Promise<void> {
  if (existsSync(SSHD)) return;
  if (process.getuid?.() !== 0 || !existsSync("/etc/debian_version"))
    throw new Error(`rig: ${SSHD} is missing; install openssh-server (the rig needs root on Debian to install it)`);
  process.stderr.write("[rig] sshd not found: installing openssh-server with apt-get\n");
  const policy = "/usr/sbin/policy-rc.d";
  const ownPolicy = !existsSync(policy);
  if (ownPolicy) await fs.writeFile(policy, "#!/bin/sh\nexit 101\n", { mode: 0o755, flag: "wx" });
  const aptGet = (...args: string[]): Promise<RunResult> =>
    run(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-o", "DPkg::Lock::Timeout=300", ...args], {
      timeoutMs: 900_000,
    });
  try {
    const install = ["install", "-y", "--no-install-recommends", "openssh-server"];
    let r = await aptGet(...install);
    if (r.code !== 0) {
      await aptGet("update"); // a fresh image has no package lists yet
      r = await aptGet(...install);
    }
    if (r.code !== 0 || !existsSync(SSHD))
      throw new Error(
        `rig: apt-get install openssh-server failed (exit ${r.code}); install it by hand:\n${r.stderr.trim().split("\n").slice(-10).join("\n")}`,
      );
  } finally {
    if (ownPolicy) await fs.rm(policy, { force: true });
  }
}

export async function keygen(file: string, comment: string): Promise<string> {
  await fs.rm(file, { force: true });
  await fs.rm(`${file}.pub`, { force: true });
  await runOk(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", file]);
  return (await fs.readFile(`${file}.pub`, "utf8")).trim();
}

export interface SshClient {
  destination: string;
  port: number;
  identity_file: string;
  known_hosts_file: string;
}

/** OpenSSH client argv that checks the host key strictly against the rig's known_hosts and never prompts. */
export function sshArgv(c: SshClient, remote: string[] = []): string[] {
  return [
    "ssh",
    "-F",
    "none",
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=yes",
    "-o",
    `UserKnownHostsFile=${c.known_hosts_file}`,
    "-o",
    "GlobalKnownHostsFile=/dev/null",
    "-o",
    "IdentitiesOnly=yes",
    "-o",
    "ConnectTimeout=5",
    "-i",
    c.identity_file,
    "-p",
    String(c.port),
    c.destination,
    ...(remote.length ? ["--", ...remote] : []),
  ];
}

export interface HostSshd {
  start: () => Promise<void>;
  stop: () => Promise<void>;
  /** a new host key (sshd restarted if it ran); returns the new public key line */
  rotateKey: () => Promise<string>;
  hostKeyPub: () => Promise<string>;
}

export interface HostSshdOptions {
  name: string;
  netns: string;
  address: string;
  dir: string; // this host's own dir under the rig dir
  /** the controller-side dir that is /root in the host's sessions */
  home: string;
  authorizedKeys: string;
  client: SshClient;
  /**
   * The host's own dockerd socket (test/rig/docker.ts): the sessions get a private tmpfs on /run
   * (with sshd's /run/sshd) in which /run/docker.sock, the docker CLI's default, links to it.
   */
  dockerSocket?: string;
}

export function hostSshd(o: HostSshdOptions): HostSshd {
  const key = path.join(o.dir, "ssh_host_ed25519_key");
  const config = path.join(o.dir, "sshd_config");
  const pidFile = path.join(o.dir, "sshd.pid");
  const logFile = path.join(o.dir, "sshd.log");
  // readiness checks strictly against this host's current key, which after rotateKey is not the rig's known_hosts entry
  const selfKnownHosts = path.join(o.dir, "known_hosts.self");
  let child: ChildProcess | null = null;

  const writeConfig = (): Promise<void> =>
    fs.writeFile(
      config,
      [
        `ListenAddress ${o.address}`,
        "Port 22",
        `HostKey ${key}`,
        `PidFile ${pidFile}`,
        `AuthorizedKeysFile ${o.authorizedKeys}`,
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        // the rig dir lives under /tmp (world-writable), which StrictModes would refuse
        "StrictModes no",
        "PrintMotd no",
        "UseDNS no",
        // every OpenSSH client has it; the default sntrup761 hybrid costs ~0.3 s of CPU per connection on a busy test machine
        "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org",
        "Subsystem sftp internal-sftp",
        "",
      ].join("\n"),
    );

  const hostKeyPub = async (): Promise<string> => (await fs.readFile(`${key}.pub`, "utf8")).trim();

  const exited = (c: ChildProcess): boolean => c.exitCode !== null || c.signalCode !== null;

  const stop = async (): Promise<void> => {
    const c = child;
    child = null;
    if (!c || exited(c)) return;
    const gone = new Promise<void>((resolve) => c.once("exit", () => resolve()));
    c.kill("SIGTERM");
    await gone;
  };

  const start = async (): Promise<void> => {
    if (child && !exited(child)) return;
    if (!existsSync(key)) await keygen(key, `narwhal-rig host ${o.name}`);
    await writeConfig();
    await fs.writeFile(selfKnownHosts, `${o.address} ${await hostKeyPub()}\n`);
    await fs.rm(pidFile, { force: true });
    await fs.mkdir("/run/sshd", { recursive: true }); // sshd's privilege separation dir
    const out = openSync(logFile, "a");
    await fs.mkdir(o.home, { recursive: true, mode: 0o700 });
    // ip netns exec → unshare (own UTS and mount ns) → sh (hostname, its own /root) → exec sshd: one pid
    // throughout. Its own empty /root makes each host's home its own, as on separate machines, and keeps
    // the controller's ~/.bashrc (which bash sources under sshd) out of every session.
    // With a dockerd of its own, /run is the host's own too: a tmpfs (made anew at each start, so a
    // restarted sshd sees it) holding sshd's privilege separation dir and the docker socket's link.
    const ownRun =
      '[ -z "$2" ] || { mount -t tmpfs -o mode=0755 rig-run /run && mkdir -m 0755 /run/sshd && ln -s "$2" /run/docker.sock; }';
    const setup = `hostname "$0" && mount --bind "$1" /root && { ${ownRun}; } && shift 2 && exec "$@"`;
    const c = spawn(
      "ip",
      [
        ...["netns", "exec", o.netns, "unshare", "--uts", "--mount", "--", "sh", "-c", setup],
        ...[o.name, o.home, o.dockerSocket ?? ""],
      ].concat([SSHD, "-D", "-e", "-f", config, "-h", key]),
      { stdio: ["ignore", out, out] },
    );
    closeSync(out);
    child = c;
    await waitReady(c);
  };

  const waitReady = async (c: ChildProcess): Promise<void> => {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    let why = "";
    let delay = 5;
    while (Date.now() < deadline && !exited(c)) {
      const pid = Number((await fs.readFile(pidFile, "utf8").catch(() => "")).trim());
      if (pid > 0 && processExists(pid)) {
        const r = await run(sshArgv({ ...o.client, known_hosts_file: selfKnownHosts }, ["true"]), {
          timeoutMs: 10_000,
        });
        if (r.code === 0) return;
        why = r.stderr.trim();
      }
      await new Promise((r) => setTimeout(r, delay)); // poll the pid file, then ssh, backing off
      delay = Math.min(delay * 2, 200);
    }
    const log = (await fs.readFile(logFile, "utf8").catch(() => "")).trim().split("\n").slice(-10).join("\n");
    await stop();
    throw new Error(
      `rig: sshd of host ${o.name} (${o.address}, netns ${o.netns}) not ready in ${READY_TIMEOUT_MS} ms` +
        `${exited(c) ? ` (exited ${c.exitCode ?? c.signalCode})` : ""}; last ssh error: ${why || "none"}; ${logFile}:\n${log}`,
    );
  };

  const rotateKey = async (): Promise<string> => {
    const running = child !== null && !exited(child);
    await stop();
    const pub = await keygen(key, `narwhal-rig host ${o.name} (rotated)`);
    if (running) await start();
    return pub;
  };

  return { start, stop, rotateKey, hostKeyPub };
}
