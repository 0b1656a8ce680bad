// One sshd per rig host, inside the host's network namespace (and its own UTS
// namespace, so `hostname` over ssh names the host), listening only on the host's
// address. Keys and config live in the rig dir; readiness is the pid file and
// then a successful `ssh -o BatchMode=yes … true`.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, openSync, closeSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { processExists } from "../../src/backends/proc.js";
import { run, runOk } from "./run.js";

export const SSHD = "/usr/sbin/sshd";
const READY_TIMEOUT_MS = 15_000;

/** Install Debian's openssh-server when sshd is missing, without letting it start the system sshd. */
export function ensureSshd(): void {
  if (existsSync(SSHD)) return;
  if (process.getuid?.() !== 0 || !existsSync("/etc/debian_version"))
    throw new Error(`rig: ${SSHD} is missing; install openssh-server (the rig needs root on Debian to install it)`);
  process.stderr.write("[rig] sshd not found: installing openssh-server with apt-get\n");
  // policy-rc.d exit 101 tells invoke-rc.d not to start services: no sshd on the root namespace's port 22.
  const policy = "/usr/sbin/policy-rc.d";
  const ownPolicy = !existsSync(policy);
  if (ownPolicy) spawnSync("sh", ["-c", `printf '#!/bin/sh\\nexit 101\\n' > ${policy} && chmod 755 ${policy}`]);
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    const install = ["-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends", "openssh-server"];
    let r = spawnSync("apt-get", install, { stdio: ["ignore", "inherit", "inherit"], env });
    if (r.status !== 0) {
      spawnSync("apt-get", ["-o", "DPkg::Lock::Timeout=300", "update"], {
        stdio: ["ignore", "inherit", "inherit"],
        env,
      });
      r = spawnSync("apt-get", install, { stdio: ["ignore", "inherit", "inherit"], env });
    }
    if (r.status !== 0 || !existsSync(SSHD))
      throw new Error(`rig: apt-get install openssh-server failed (exit ${r.status ?? r.signal}); install it by hand`);
  } finally {
    if (ownPolicy) spawnSync("rm", ["-f", policy]);
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
  authorizedKeys: string;
  client: SshClient;
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
        "AcceptEnv NARWHAL_*",
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
    // ip netns exec → unshare (own UTS ns) → sh (sets the hostname) → exec sshd: one pid throughout
    const c = spawn(
      "ip",
      ["netns", "exec", o.netns, "unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', o.name].concat([
        SSHD,
        "-D",
        "-e",
        "-f",
        config,
        "-h",
        key,
      ]),
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
