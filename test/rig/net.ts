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
import { processExists } from "../../src/backends/proc.js";
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

/** The first three octets of every IPv4 address on this (root) namespace's interfaces. */
function prefixesInUse(): Set<string> {
  const out = runSync(["ip", "-j", "-4", "addr"]).stdout;
  const links = JSON.parse(out || "[]") as { addr_info?: { local?: string }[] }[];
  const used = new Set<string>();
  for (const l of links)
    for (const a of l.addr_info ?? []) if (a.local) used.add(a.local.split(".").slice(0, 3).join("."));
  return used;
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
 * concurrent test files never pick the same one, and no address of it on any interface.
 * `fixed` is "a.b.c" (a named or explicit subnet); otherwise one of 10.201–250.x at random.
 */
export function claimSubnet(fixed?: string): { prefix: string; release: () => void } {
  fs.mkdirSync(SUBNET_CLAIMS, { recursive: true });
  const tryClaim = (prefix: string): boolean => {
    if (prefixesInUse().has(prefix)) return false;
    const file = path.join(SUBNET_CLAIMS, prefix);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        fs.writeFileSync(file, `${process.pid}\n`, { flag: "wx" });
        return true;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        const owner = ownerOf(file);
        if (owner !== null && processExists(owner)) return false;
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

export interface RigResources {
  netns: string[];
  links: string[];
  dir?: string;
}

/**
 * Remove a rig's kernel objects and files: SIGKILL every process in its namespaces,
 * delete the namespaces, the root-side veths (which takes their peers) and the bridge,
 * then the rig dir. Synchronous so that it also runs from a process "exit" handler.
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
  const links = new Set(listLinks().map((l) => l.ifname));
  for (const l of r.links) if (links.has(l)) runSync(["ip", "link", "del", l]);
  if (r.dir) fs.rmSync(r.dir, { recursive: true, force: true });
}

export function listNetns(): string[] {
  const out = runSync(["ip", "-j", "netns"]).stdout.trim();
  return (JSON.parse(out || "[]") as { name: string }[]).map((n) => n.name);
}

export function listLinks(): { ifname: string; ifalias?: string }[] {
  return JSON.parse(runSync(["ip", "-j", "link"]).stdout || "[]") as { ifname: string; ifalias?: string }[];
}

/** Leftovers of rigs whose creating process is dead (a killed test run): namespaces, links, dirs, claims. */
export function sweepStale(): RigResources[] {
  const dead = (pid: number): boolean => Number.isInteger(pid) && pid > 0 && !processExists(pid);
  const netns = listNetns().filter((n) => n.startsWith(NETNS_PREFIX) && dead(Number(n.split("-")[1])));
  const links = listLinks()
    .filter((l) => l.ifalias?.startsWith(LINK_ALIAS_PREFIX) && dead(Number(l.ifalias.slice(LINK_ALIAS_PREFIX.length))))
    .map((l) => l.ifname);
  const dirs = (fs.existsSync(RIG_BASE) ? fs.readdirSync(RIG_BASE) : [])
    .filter((d) => /^\d+-[0-9a-f]+$/.test(d) && dead(Number(d.split("-")[0])))
    .map((d) => path.join(RIG_BASE, d));
  const swept: RigResources[] = [{ netns, links }, ...dirs.map((dir) => ({ netns: [], links: [], dir }))];
  for (const r of swept) removeRig(r);
  for (const c of fs.existsSync(SUBNET_CLAIMS) ? fs.readdirSync(SUBNET_CLAIMS) : []) {
    const owner = ownerOf(path.join(SUBNET_CLAIMS, c));
    if (owner !== null && dead(owner)) fs.rmSync(path.join(SUBNET_CLAIMS, c), { force: true });
  }
  return swept.filter((r) => r.netns.length + r.links.length > 0 || r.dir);
}
