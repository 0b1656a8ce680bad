// A multi-host test rig: each host is a network namespace on one bridge, with its
// own address and its own sshd, so that a controller in the root namespace reaches
// it only over SSH at that address. See test/rig/README.md.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { allowBridgeForwarding } from "./forward-rule.js";
import { claimSubnet, LINK_ALIAS_PREFIX, NAMED_SUBNETS, parseSubnet, removeRig, rigNames, sweepStale } from "./net.js";
import { run, runOk, type RunOptions, type RunResult } from "./run.js";
import { ensureSshd, hostSshd, keygen, sshArgv, type HostSshd, type SshClient } from "./sshd.js";
import { dockerPaths, simImageOnAll, startHostDockerd, type RigDocker, type RigSimImage } from "./docker.js";

export { sshArgv } from "./sshd.js";
export type { RunResult } from "./run.js";
export type { RigDocker, RigSimImage } from "./docker.js";

export interface RigHost {
  /** `<rig name>-a`, `<rig name>-b`, …; also the hostname its sshd's sessions see */
  name: string;
  netns: string;
  address: string;
  port: 22;
  ssh: SshClient & { destination: `root@${string}` };
  /**
   * The controller-side dir that is /root in this host's ssh sessions (and only there): put a file
   * here that only this host has. Everything else of the filesystem is shared with the controller.
   */
  home: string;
  /** `ip netns exec` in the host's namespace: for test setup and assertions only, never the code under test */
  exec(argv: string[], opts?: RunOptions): Promise<RunResult>;
  /** start a process in the host's namespace (killed at teardown) */
  spawnIn(argv: string[]): ChildProcess;
  stopSshd(): Promise<void>;
  startSshd(): Promise<void>;
  /** a new host key, sshd restarted with it: the rig's known_hosts entry no longer matches */
  rotateHostKey(): Promise<void>;
  /** the inode of the host's network namespace, as `stat -L /proc/PID/ns/net` reports it */
  netnsInode(): Promise<string>;
  /** the host's own dockerd (with `docker: true`), /var/run/docker.sock in its ssh sessions */
  docker?: RigDocker;
}

export interface Rig {
  hosts: RigHost[];
  /** the rig's own dir: client key, known_hosts, authorized_keys, one dir per host */
  dir: string;
  /** the controller's (root namespace's) address on the bridge, `<subnet>.1` */
  gateway: string;
  bridge: string;
  /** with `docker: true`: the simulator image, on every host's dockerd under one ID */
  simImage?: RigSimImage;
  teardown(): Promise<void>;
}

export interface RigOptions {
  hosts: number;
  /** names the hosts (`<name>-a`, …); a name in NAMED_SUBNETS ("example") picks its fixed subnet */
  name?: string;
  /** a fixed "a.b.c.0/24" instead of a random free one in 10.201–250.x.0/24 */
  subnet?: string;
  /** a private dockerd per host, in its namespace, with the simulator image (test/rig/docker.ts) */
  docker?: boolean;
}

export async function createRig(opts: RigOptions): Promise<Rig> {
  if (!Number.isInteger(opts.hosts) || opts.hosts < 1 || opts.hosts > 26)
    throw new Error(`rig: hosts must be 1..26, got ${opts.hosts}`);
  if (process.getuid?.() !== 0) throw new Error("rig: network namespaces need root; run the rig tests as root");
  await ensureSshd();
  sweepStale();
  const name = opts.name ?? "rig";
  const fixed = opts.subnet ?? NAMED_SUBNETS[name];
  const { prefix, release } = claimSubnet(fixed === undefined ? undefined : parseSubnet(fixed));

  // the bridge name is the rig's claim on its rid: an existing one (another rig's) is never ours to remove
  let n = rigNames();
  for (let attempt = 0; (await run(["ip", "link", "add", n.bridge, "type", "bridge"])).code !== 0; attempt++) {
    if (attempt >= 5) {
      release();
      throw new Error(
        `rig: cannot create a bridge (last tried ${n.bridge}); see \`ip link add ${n.bridge} type bridge\``,
      );
    }
    n = rigNames();
  }
  const netns = Array.from({ length: opts.hosts }, (_, i) => n.netns(i));
  const links = [n.bridge, ...netns.map((_, i) => n.veth(i))];
  const resources = { netns, links, forward: [] as string[][], dir: n.dir };
  let done: Promise<void> | null = null;
  const sshds: (HostSshd | undefined)[] = [];
  const dockerds: (() => Promise<void>)[] = [];
  // Last resort when the process exits without teardown; a SIGKILLed one is swept by the next createRig.
  const onExit = (): void => {
    removeRig(resources);
    release();
  };
  process.on("exit", onExit);
  const teardown = (): Promise<void> =>
    (done ??= (async () => {
      process.off("exit", onExit);
      await Promise.all(sshds.map((s) => s?.stop() ?? Promise.resolve()));
      // gracefully first (containers removed, mounts undone); removeRig kills whatever is left
      await Promise.allSettled(dockerds.map((stop) => stop()));
      removeRig(resources);
      release();
    })());

  try {
    await fs.mkdir(n.dir, { recursive: true, mode: 0o700 });
    const alias = `${LINK_ALIAS_PREFIX}${process.pid}`;
    const gateway = `${prefix}.1`;
    await runOk(["ip", "link", "set", n.bridge, "alias", alias]);
    // host-to-host traffic crosses the bridge: let it through the root namespace's FORWARD chain (a Docker
    // Engine's DROP policy would time it out)
    const rule = allowBridgeForwarding(n.bridge, alias);
    if (rule) resources.forward.push(rule);
    await runOk(["ip", "addr", "add", `${gateway}/24`, "dev", n.bridge]);
    await runOk(["ip", "link", "set", n.bridge, "up"]);

    const identity = path.join(n.dir, "id_ed25519");
    const knownHosts = path.join(n.dir, "known_hosts");
    const authorizedKeys = path.join(n.dir, "authorized_keys");
    await fs.writeFile(authorizedKeys, `${await keygen(identity, `narwhal-rig client ${n.rid}`)}\n`);

    const hosts = await Promise.all(
      netns.map(async (ns, i): Promise<RigHost> => {
        const hostName = `${name}-${String.fromCharCode(97 + i)}`;
        const address = `${prefix}.${11 + i}`;
        const veth = n.veth(i);
        await runOk(["ip", "netns", "add", ns]);
        await runOk(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns]);
        await runOk(["ip", "link", "set", veth, "alias", alias]);
        await runOk(["ip", "link", "set", veth, "master", n.bridge, "up"]);
        await runOk(["ip", "-n", ns, "link", "set", "lo", "up"]);
        await runOk(["ip", "-n", ns, "addr", "add", `${address}/24`, "dev", "eth0"]);
        await runOk(["ip", "-n", ns, "link", "set", "eth0", "up"]);
        const hostDir = path.join(n.dir, hostName);
        await fs.mkdir(hostDir, { recursive: true });
        const ssh = {
          destination: `root@${address}` as const,
          port: 22,
          identity_file: identity,
          known_hosts_file: knownHosts,
        };
        const home = path.join(hostDir, "root");
        const dockerSocket = opts.docker ? dockerPaths(hostDir).socket : undefined;
        const sshd = hostSshd({
          name: hostName,
          netns: ns,
          address,
          dir: hostDir,
          home,
          authorizedKeys,
          client: ssh,
          ...(dockerSocket ? { dockerSocket } : {}),
        });
        sshds[i] = sshd;
        await sshd.start();
        let docker: RigDocker | undefined;
        if (opts.docker) {
          const d = await startHostDockerd(ns, hostDir);
          dockerds.push(d.stop);
          docker = d.docker;
        }
        return {
          name: hostName,
          netns: ns,
          address,
          port: 22,
          ssh,
          home,
          exec: (argv, o) => run(["ip", "netns", "exec", ns, ...argv], o),
          spawnIn: (argv) => spawn("ip", ["netns", "exec", ns, ...argv], { stdio: ["ignore", "pipe", "pipe"] }),
          stopSshd: () => sshd.stop(),
          startSshd: () => sshd.start(),
          rotateHostKey: async () => {
            await sshd.rotateKey();
          },
          netnsInode: async () => String((await fs.stat(`/run/netns/${ns}`)).ino),
          ...(docker ? { docker } : {}),
        };
      }),
    );
    // known_hosts by address (port 22 needs no [addr]:port form), so the client checks strictly and never prompts
    const lines = await Promise.all(hosts.map(async (h, i) => `${h.address} ${await sshds[i]?.hostKeyPub()}`));
    await fs.writeFile(knownHosts, lines.join("\n") + "\n");
    const dockers = hosts.flatMap((h) => (h.docker ? [h.docker] : []));
    const simImage = opts.docker ? await simImageOnAll(dockers) : undefined;
    return { hosts, dir: n.dir, gateway, bridge: n.bridge, ...(simImage ? { simImage } : {}), teardown };
  } catch (e) {
    await teardown();
    throw e;
  }
}

/** Run `argv` on a rig host over the rig's ssh client (strict host key checking, BatchMode). */
export function sshRun(host: RigHost, argv: string[], opts?: RunOptions): Promise<RunResult> {
  return run(sshArgv(host.ssh, argv), opts);
}
