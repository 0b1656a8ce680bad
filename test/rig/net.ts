// The rig's network: names, the /24 it claims, and removal of everything a rig
// (or a killed earlier run's rig) put into the kernel.
//
// Names carry the creating pid so that a later createRig can tell leftovers of a
// dead run from a live run's rig on the same machine:
//   namespaces  nwr-<pid>-<rid>-<letter>       (no length limit)
//   bridge      nwr<rid>                        (interface names are at most 15 chars)
//   host veths  nwr<rid>v<i>  (root side; "eth0" inside the namespace)
// Interfaces carry the pid in their alias ("narwhal-rig pid=<pid>"), the rig dir
// and the subnet claim file carry it in their name / content.
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseProcStat, processExists } from "../../src/backends/proc.js";
import { unmountUnder } from "../docker/mounts.js";
import { removeRigCgroups, rigCgroupNames } from "./cgroups.js";
import { deadOwnersRules, removeForwardRule } from "./forward-rule.js";
import { runSync } from "./run.js";

export const NETNS_PREFIX = "nwr-";
export const LINK_ALIAS_PREFIX = "narwhal-rig pid=";
/** Rig dirs and subnet claims live here, one entry per rig. */
export const RIG_BASE = path.join(os.tmpdir(), "narwhal-rig");
export const SUBNET_CLAIMS = path.join(RIG_BASE, "subnets");

/** Fixed subnets for named rigs whose addresses are written into examples. */
export const NAMED_SUBNETS: Readonly<Record<string, string>> = { example: "10.77.0.0/24" };

export interface RigNames {
  rid: string;
  bridge: string;
  netns: (i: number) => string;
  veth: (i: number) => string;
  dir: string;
}

export function rigNames(pid = process.pid, rid = randomBytes(3).toString("hex").slice(0, 5)): RigNames {
  return {
    rid,
    bridge: `nwr${rid}`,
    netns: (i) => `${NETNS_PREFIX}${pid}-${rid}-${String.fromCharCode(97 + i)}`,
    veth: (i) => `nwr${rid}v${i}`,
    dir: path.join(RIG_BASE, `${pid}-${rid}`),
  };
}

/** "10.77.0.0/24" → "10.77.0"; only /24s with a zero host part. */
export function parseSubnet(cidr: string): string {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.0\/24$/.exec(cidr);
  if (!m || m.slice(1).some((o) => Number(o) > 255))
    throw new Error(`rig: subnet ${JSON.stringify(cidr)} is not an a.b.c.0/24; pass e.g. "10.77.0.0/24"`);
  return m.slice(1, 4).join(".");
}

const ipv4 = (a: string): number => a.split(".").reduce((n, o) => n * 256 + Number(o), 0);

/** Whether two IPv4 networks share any address: equal under the shorter of the two masks. */
export function overlaps(a: string, aLen: number, b: string, bLen: number): boolean {
  const len = Math.min(aLen, bLen);
  const block = 2 ** (32 - len);
  return Math.floor(ipv4(a) / block) === Math.floor(ipv4(b) / block);
}

/** Whether `<prefix>.0/24` overlaps an address or a (non-default) route of the root namespace. */
function subnetInUse(prefix: string): boolean {
  const nets: [string, number][] = [];
  const links = JSON.parse(runSync(["ip", "-j", "-4", "addr"]).stdout || "[]") as {
    addr_info?: { local?: string; prefixlen?: number }[];
  }[];
  for (const l of links) for (const a of l.addr_info ?? []) if (a.local) nets.push([a.local, a.prefixlen ?? 32]);
  const routes = JSON.parse(runSync(["ip", "-j", "-4", "route", "show", "table", "all"]).stdout || "[]") as {
    dst?: string;
  }[];
  for (const r of routes) {
    const [dst, len] = (r.dst ?? "default").split("/");
    if (dst && /^\d+\.\d+\.\d+\.\d+$/.test(dst) && !dst.startsWith("127.")) nets.push([dst, Number(len ?? 32)]);
  }
  return nets.some(([net, len]) => overlaps(`${prefix}.0`, 24, net, len));
}

function ownerOf(file: string): number | null {
  try {
    const pid = Number(fs.readFileSync(file, "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Claim a /24 for this rig: a claim file (created exclusively, holding our pid) so
 * concurrent test files never pick the same one, and no address or route of the root namespace overlapping it.
 * `fixed` is "a.b.c" (a named or explicit subnet); otherwise one of 10.201–250.x at random.
 */
export function claimSubnet(fixed?: string): { prefix: string; release: () => void } {
  fs.mkdirSync(SUBNET_CLAIMS, { recursive: true });
  const tryClaim = (prefix: string): boolean => {
    if (subnetInUse(prefix)) return false;
    const file = path.join(SUBNET_CLAIMS, prefix);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        fs.writeFileSync(file, `${process.pid}\n`, { flag: "wx" });
        return true;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        const owner = ownerOf(file);
        if (owner !== null && !ownerDead(owner)) return false;
        fs.rmSync(file, { force: true }); // its run is gone
      }
    }
    return false;
  };
  const release = (prefix: string) => () => {
    const file = path.join(SUBNET_CLAIMS, prefix);
    if (ownerOf(file) === process.pid) fs.rmSync(file, { force: true });
  };
  if (fixed !== undefined) {
    if (!tryClaim(fixed))
      throw new Error(
        `rig: subnet ${fixed}.0/24 is in use (an interface carries it, or a live rig claimed it in ${SUBNET_CLAIMS}); tear that rig down or pick another subnet`,
      );
    return { prefix: fixed, release: release(fixed) };
  }
  for (let attempt = 0; attempt < 200; attempt++) {
    const b = randomBytes(2);
    const prefix = `10.${201 + ((b[0] ?? 0) % 50)}.${b[1] ?? 0}`;
    if (tryClaim(prefix)) return { prefix, release: release(prefix) };
  }
  throw new Error(`rig: found no free /24 in 10.201-250.x.0 after 200 tries; sweep leftovers (see test/rig/README.md)`);
}

/**
 * Whether the process that created a rig is gone. A zombie counts as gone: a killed test
 * worker whose parent died too is reparented to pid 1, which need not reap it soon (or ever).
 */
export function ownerDead(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (!processExists(pid)) return true;
  try {
    return parseProcStat(fs.readFileSync(`/proc/${pid}/stat`, "utf8")).state === "Z";
  } catch {
    return !processExists(pid); // exited between the two looks
  }
}

export interface RigResources {
  netns: string[];
  links: string[];
  /** iptables rules letting the bridge's frames through (test/rig/forward-rule.ts) */
  forward?: string[][];
  dir?: string;
}

/**
 * Remove a rig's kernel objects and files: SIGKILL every process in its namespaces and
 * in the cgroups named as them (a host dockerd's containers), delete the namespaces, the root-side veths (which takes their peers), the bridge
 * and its forwarding rule, then the rig dir (after unmounting what a host's dockerd mounted under it). Synchronous so that it also runs from a process "exit" handler.
 * Idempotent: what is already gone is skipped.
 */
export function removeRig(r: RigResources): void {
  const existing = new Set(listNetns());
  for (const ns of r.netns) {
    if (!existing.has(ns)) continue;
    for (const pid of runSync(["ip", "netns", "pids", ns]).stdout.split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(pid), "SIGKILL");
      } catch {
        /* already gone */
      }
    }
    runSync(["ip", "netns", "del", ns]);
  }
  // a host's dockerd's containers, also those with a network namespace of their own
  removeRigCgroups(r.netns);
  const links = new Set(listLinks().map((l) => l.ifname));
  for (const l of r.links) if (links.has(l)) runSync(["ip", "link", "del", l]);
  for (const rule of r.forward ?? []) removeForwardRule(rule);
  if (r.dir) {
    // a host's dockerd (test/rig/docker.ts) mounts its layers under the rig dir: undo them first
    unmountUnder(r.dir);
    fs.rmSync(r.dir, { recursive: true, force: true });
  }
}

export function listNetns(): string[] {
  const out = runSync(["ip", "-j", "netns"]).stdout.trim();
  return (JSON.parse(out || "[]") as { name: string }[]).map((n) => n.name);
}

export function listLinks(): { ifname: string; ifalias?: string }[] {
  return JSON.parse(runSync(["ip", "-j", "link"]).stdout || "[]") as { ifname: string; ifalias?: string }[];
}

/** Leftovers of rigs whose creating process is dead (a killed test run): namespaces, links, forwarding rules, dirs, claims. */
export function sweepStale(): RigResources[] {
  const dead = ownerDead;
  const deadRun = (n: string) => n.startsWith(NETNS_PREFIX) && dead(Number(n.split("-")[1]));
  // a host's cgroup (test/rig/cgroups.ts) may outlive its namespace: both are swept by name
  const netns = [...new Set([...listNetns().filter(deadRun), ...rigCgroupNames(deadRun)])];
  const links = listLinks()
    .filter((l) => l.ifalias?.startsWith(LINK_ALIAS_PREFIX) && dead(Number(l.ifalias.slice(LINK_ALIAS_PREFIX.length))))
    .map((l) => l.ifname);
  const dirs = (fs.existsSync(RIG_BASE) ? fs.readdirSync(RIG_BASE) : [])
    .filter((d) => /^\d+-[0-9a-f]+$/.test(d) && dead(Number(d.split("-")[0])))
    .map((d) => path.join(RIG_BASE, d));
  const forward = deadOwnersRules(LINK_ALIAS_PREFIX, dead);
  const swept: RigResources[] = [{ netns, links, forward }, ...dirs.map((dir) => ({ netns: [], links: [], dir }))];
  for (const r of swept) removeRig(r);
  for (const c of fs.existsSync(SUBNET_CLAIMS) ? fs.readdirSync(SUBNET_CLAIMS) : []) {
    const owner = ownerOf(path.join(SUBNET_CLAIMS, c));
    if (owner !== null && dead(owner)) fs.rmSync(path.join(SUBNET_CLAIMS, c), { force: true });
  }
  return swept.filter((r) => r.netns.length + r.links.length + (r.forward?.length ?? 0) > 0 || r.dir);
}
