// The multi-host rig (test/rig): two hosts as network namespaces with their own
// sshd, reached over the real OpenSSH client with strict host key checking.
import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { LINK_ALIAS_PREFIX, rigNames, SUBNET_CLAIMS } from "../rig/net.js";
import { heldByKilledRun } from "../rig/killed-run.js";
import { createRig, sshArgv, sshRun, type Rig, type RigHost } from "../rig/rig.js";
import { runCli, status } from "./cli.js";

/** First line a host's listener sends, read by the controller over the bridge. */
function readGreeting(address: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: address, port }, () => {});
    let data = "";
    s.setEncoding("utf8");
    s.on("data", (d: string) => (data += d));
    s.on("end", () => resolve(data.trim()));
    s.on("error", reject);
  });
}

/**
 * Start, over ssh, a listener on the host's own address that greets each connection
 * with the host's name; resolves once the remote side printed "bound".
 */
function listenOverSsh(host: RigHost, port: number): { bound: Promise<void>; stop: () => void } {
  const py = [
    "import socket,sys",
    "s=socket.socket()",
    `s.bind(("${host.address}",${port}))`,
    "s.listen()",
    'print("bound",flush=True)',
    "while True:",
    "  c,_=s.accept(); c.sendall((socket.gethostname()+chr(10)).encode()); c.close()",
  ].join("\n");
  // -tt: a remote pty so that ending ssh hangs the remote listener up
  const child = spawn(sshArgv(host.ssh)[0]!, [...sshArgv(host.ssh).slice(1), "-tt", "--", "python3", "-c", `'${py}'`]);
  const bound = new Promise<void>((resolve, reject) => {
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      if (out.includes("bound")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`listener on ${host.name} exited ${code}: ${out}`)));
  });
  return { bound, stop: () => child.kill("SIGTERM") };
}

// read straight from ip(8), not through the rig's own helpers
const netnsNames = (): string[] =>
  (JSON.parse(execFileSync("ip", ["-j", "netns"], { encoding: "utf8" }) || "[]") as { name: string }[]).map(
    (n) => n.name,
  );
const linkNames = (): string[] =>
  (JSON.parse(execFileSync("ip", ["-j", "link"], { encoding: "utf8" })) as { ifname: string }[]).map((l) => l.ifname);

describe("multi-host rig", () => {
  let rig: Rig;
  let a: RigHost;
  let b: RigHost;

  // the first createRig may install openssh-server, waiting up to 300 s for the dpkg lock
  beforeAll(async () => {
    rig = await createRig({ hosts: 2 });
    [a, b] = rig.hosts as [RigHost, RigHost];
  }, 600_000);
  afterAll(async () => {
    await rig?.teardown();
  });

  test("each host answers over ssh at its own address, as itself", async () => {
    expect(a.address).not.toBe(b.address);
    for (const h of [a, b]) {
      const r = await sshRun(h, ["hostname", "&&", "ip", "-4", "-o", "addr", "show", "dev", "eth0"]);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      const [hostname, addr] = r.stdout.split("\n");
      expect(hostname).toBe(h.name);
      expect(addr).toContain(`inet ${h.address}/24`);
      // its sshd is all that listens in its namespace, and only on its address
      const ss = await h.exec(["ss", "-Hltn"]);
      expect(
        ss.stdout
          .trim()
          .split("\n")
          .map((l) => l.trim().split(/\s+/)[3]),
      ).toEqual([`${h.address}:22`]);
    }
  });

  test("a process started over ssh on host A lives in A's network namespace", async () => {
    const r = await sshRun(a, ["sh", "-c", "'sleep 60 </dev/null >/dev/null 2>&1 & echo $!'"]);
    expect(r.code, r.stderr).toBe(0);
    const pid = Number(r.stdout.trim());
    expect(pid).toBeGreaterThan(0);
    const ns = String((await fs.stat(`/proc/${pid}/ns/net`)).ino);
    expect(ns).toBe(await a.netnsInode());
    expect(ns).not.toBe(await b.netnsInode());
    expect(ns).not.toBe(String((await fs.stat("/proc/self/ns/net")).ino));
    process.kill(pid, "SIGKILL");
  });

  test("a file in host A's home is on host A only: B and the controller's /root do not have it", async () => {
    const name = `rig-only-on-a-${process.pid}`;
    await fs.writeFile(path.join(a.home, name), `${a.name}\n`);
    expect((await sshRun(a, ["cat", `/root/${name}`])).stdout).toBe(`${a.name}\n`);
    const onB = await sshRun(b, ["cat", `/root/${name}`]);
    expect(onB.code).not.toBe(0);
    expect(onB.stderr).toContain("No such file or directory");
    expect(existsSync(`/root/${name}`)).toBe(false);
  });

  test("both hosts bind the same port on their own address at once, and reach each other", async () => {
    const port = 18401;
    const la = listenOverSsh(a, port);
    const lb = listenOverSsh(b, port);
    try {
      await Promise.all([la.bound, lb.bound]);
      expect(await readGreeting(a.address, port)).toBe(a.name);
      expect(await readGreeting(b.address, port)).toBe(b.name);
      // and the hosts reach each other across the bridge (as a P/D pair's KV transfer does)
      const py = `import socket; print(socket.create_connection(("${b.address}", ${port}), 5).recv(64).decode().strip())`;
      const fromA = await sshRun(a, ["python3", "-c", `'${py}'`]);
      expect(fromA.stdout.trim(), fromA.stderr).toBe(b.name);
    } finally {
      la.stop();
      lb.stop();
    }
  });

  test("stopSshd refuses connections; startSshd brings ssh back", async () => {
    await b.stopSshd();
    const down = await sshRun(b, ["true"]);
    expect(down.code).toBe(255);
    expect(down.stderr).toContain("Connection refused");
    expect((await sshRun(a, ["true"])).code).toBe(0); // the other host is untouched
    await b.startSshd();
    const up = await sshRun(b, ["true"]);
    expect(up.stderr).toBe("");
    expect(up.code).toBe(0);
  });

  test("rotateHostKey makes strict host key checking refuse the host", async () => {
    await b.rotateHostKey();
    const r = await sshRun(b, ["true"]);
    expect(r.code).toBe(255);
    expect(r.stderr).toMatch(/Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED/);
    expect((await sshRun(a, ["true"])).code).toBe(0);
  });

  test("teardown leaves no namespace, veth, bridge or dir of the rig, and is idempotent", async () => {
    const mine = (names: string[]): string[] =>
      names.filter((n) => n === rig.bridge || rig.hosts.some((h) => n === h.netns) || n.startsWith(rig.bridge));
    expect(mine(netnsNames())).toHaveLength(2);
    expect(mine(linkNames())).toHaveLength(3); // the bridge and two root-side veths
    await rig.teardown();
    await rig.teardown();
    expect(mine(netnsNames())).toEqual([]);
    expect(mine(linkNames())).toEqual([]);
    expect(existsSync(rig.dir)).toBe(false);
  });
});

describe("leftovers of a killed run", () => {
  test("createRig sweeps them: namespaces (and the processes in them), links, rig dir and subnet claim", async () => {
    // a pid that is certainly dead: a process we started and saw exit
    const gone = spawn("true");
    const deadPid = await new Promise<number>((resolve) => gone.on("exit", () => resolve(gone.pid!)));
    // what a run SIGKILLed mid-test leaves behind, under the names that run would have used
    const n = rigNames(deadPid);
    const ns = n.netns(0);
    const alias = `${LINK_ALIAS_PREFIX}${deadPid}`;
    const claim = path.join(SUBNET_CLAIMS, "10.200.0");
    for (const argv of [
      ["netns", "add", ns],
      ["link", "add", n.bridge, "type", "bridge"],
      ["link", "set", n.bridge, "alias", alias],
      ["link", "add", n.veth(0), "type", "veth", "peer", "name", "eth0", "netns", ns],
      ["link", "set", n.veth(0), "alias", alias, "master", n.bridge],
    ])
      execFileSync("ip", argv);
    await fs.mkdir(n.dir, { recursive: true });
    await fs.mkdir(SUBNET_CLAIMS, { recursive: true });
    await fs.writeFile(claim, `${deadPid}\n`);
    const sleeper = spawn("ip", ["netns", "exec", ns, "sleep", "600"], { stdio: "ignore" });
    const sleeperGone = new Promise<NodeJS.Signals | null>((resolve) => sleeper.on("exit", (_c, sig) => resolve(sig)));
    // the sleeper is in the namespace once `ip netns pids` lists it
    await expect.poll(() => execFileSync("ip", ["netns", "pids", ns], { encoding: "utf8" }).trim()).not.toBe("");

    const rig = await createRig({ hosts: 1 });
    try {
      expect(netnsNames()).not.toContain(ns);
      expect(linkNames()).not.toContain(n.bridge);
      expect(linkNames()).not.toContain(n.veth(0));
      expect(existsSync(n.dir)).toBe(false);
      expect(existsSync(claim)).toBe(false);
      expect(await sleeperGone).toBe("SIGKILL");
      // a live run's rig is not a leftover: this one still answers
      expect((await sshRun(rig.hosts[0]!, ["true"])).code).toBe(0);
    } finally {
      await rig.teardown();
    }
  });
});

describe("a test run SIGKILLed while it holds a rig", () => {
  test("leaves its namespace and bridge behind, and the next createRig removes them", async () => {
    const held = await heldByKilledRun<{ netns: string; bridge: string; dir: string }>([
      "const rig = await createRig({ hosts: 1 });",
      "say({ netns: rig.hosts[0].netns, bridge: rig.bridge, dir: rig.dir });",
    ]);
    expect(netnsNames()).toContain(held.netns); // no exit handler runs under SIGKILL
    expect(linkNames()).toContain(held.bridge);

    const rig = await createRig({ hosts: 1 });
    await rig.teardown();
    expect(netnsNames()).not.toContain(held.netns);
    expect(linkNames()).not.toContain(held.bridge);
    expect(existsSync(held.dir)).toBe(false);
  });
});

describe("the example rig", () => {
  test("createRig({ name: 'example' }) gives the hosts and addresses examples/two-host-sim is written for", async () => {
    const dir = path.join(import.meta.dirname, "../../examples/two-host-sim");
    const env = Object.fromEntries(
      (await fs.readFile(path.join(dir, "deployment.env"), "utf8"))
        .split("\n")
        .filter((l) => /^[A-Z0-9_]+=/.test(l))
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    const fleet = JSON.parse(await fs.readFile(path.join(dir, "fleet.json"), "utf8")) as { nodes: { name: string }[] };
    const rig = await createRig({ hosts: 2, name: "example" });
    try {
      expect(rig.hosts.map((h) => h.address)).toEqual([env["NARWHAL_NODE_1_IP"], env["NARWHAL_NODE_2_IP"]]);
      expect(rig.hosts.map((h) => h.name)).toEqual(fleet.nodes.map((n) => n.name));
      // the example's fabric interface is the one each host carries its address on
      const r = await sshRun(rig.hosts[1]!, [
        "ip",
        "-4",
        "-o",
        "addr",
        "show",
        "dev",
        env["NARWHAL_FABRIC_INTERFACE"]!,
      ]);
      expect(r.stdout).toContain(`inet ${env["NARWHAL_NODE_2_IP"]}/24`);
      // a fixed subnet is this rig's while it lives: a second one is refused, naming it
      await expect(createRig({ hosts: 1, name: "example" })).rejects.toThrow(/subnet 10\.77\.0\.0\/24 is in use/);

      // the shipped example converges on it, as is: its nodes name the rig's key and known_hosts under rig/
      await fs.mkdir(path.join(dir, "rig"), { mode: 0o700 });
      await fs.copyFile(path.join(rig.dir, "id_ed25519"), path.join(dir, "rig/id_ed25519"));
      await fs.copyFile(path.join(rig.dir, "known_hosts"), path.join(dir, "rig/known_hosts"));
      await fs.chmod(path.join(dir, "rig/id_ed25519"), 0o600);
      const state = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "nwex-")), "state");
      try {
        const r = await runCli(["reconcile", "--once", "--desired", dir, "--state", state]);
        expect(r.code, r.stderr).toBe(0);
        const view = await status(state, dir);
        expect(view.engines.map((e) => [e.engine, e.phase])).toEqual([
          ["engine-1", "captured"],
          ["engine-2", "captured"],
        ]);
      } finally {
        await runCli(["down", "--desired", dir, "--state", state]);
        await fs.rm(path.dirname(state), { recursive: true, force: true });
      }
    } finally {
      await fs.rm(path.join(dir, "rig"), { recursive: true, force: true });
      await rig.teardown();
    }
  });
});
