// Issue 10's acceptance on the rig: one controller, a P/D fleet on two hosts it
// reaches only over SSH (network namespaces with their own sshd, test/rig).
// Prefill engine-1 on host A, decode engine-2 on host B, the same ports on
// both. Each engine's process lives in its own host's network namespace and
// advertises its node's address as its NIXL side channel. Node faults block
// only that node's engines.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseEnviron } from "../../src/hosts/proc-parse.js";
import { createRig, type Rig, type RigHost } from "../rig/rig.js";
import { engineProcesses, kvOf, runCli, sidecarProcesses, status, teardown } from "./cli.js";
import { killAt, reconcileOnce } from "./campaign.js";
import { rigFleet, RIG_PORTS, RIG_WORK_DIR, type RigFleet } from "./rig-fleet.js";

let rig: Rig;
let a: RigHost;
let b: RigHost;

beforeAll(async () => {
  rig = await createRig({ hosts: 2 });
  [a, b] = rig.hosts as [RigHost, RigHost];
});

afterAll(async () => {
  await rig?.teardown();
});

/** `stat -L /proc/PID/ns/net` as the kernel names it: the network namespace the process lives in. */
async function netnsOf(pid: number): Promise<string> {
  return String((await fs.stat(`/proc/${pid}/ns/net`)).ino);
}

async function environOf(pid: number): Promise<Record<string, string>> {
  return parseEnviron(await fs.readFile(`/proc/${pid}/environ`, "utf8"));
}

async function pidsByEngine(stateDir: string): Promise<Record<string, number>> {
  return Object.fromEntries((await engineProcesses(stateDir)).map((p) => [p.engine, p.pid]));
}

describe("a two-host P/D fleet, native backend, one controller over ssh", () => {
  let fleet: RigFleet;

  beforeAll(async () => {
    fleet = await rigFleet([a, b]);
  });

  afterAll(async () => {
    if (fleet) await teardown(fleet.stateDir);
  });

  it("converges with each engine in its own host's namespace, advertising its node's address", async () => {
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    const pids = await pidsByEngine(fleet.stateDir);
    expect(Object.keys(pids).sort()).toEqual(["engine-1", "engine-2"]);
    expect(await netnsOf(pids["engine-1"]!)).toBe(await a.netnsInode());
    expect(await netnsOf(pids["engine-2"]!)).toBe(await b.netnsInode());
    for (const [engine, host] of [
      ["engine-1", a],
      ["engine-2", b],
    ] as const) {
      const env = await environOf(pids[engine]!);
      expect(env.VLLM_NIXL_SIDE_CHANNEL_HOST).toBe(host.address);
      expect(env.VLLM_NIXL_SIDE_CHANNEL_PORT).toBe(String(RIG_PORTS.nixl));
    }
    // The run's files are on the engine's own node: /root is each host's own directory.
    for (const [engine, host, other] of [
      ["engine-1", a, b],
      ["engine-2", b, a],
    ] as const) {
      const onNode = `${host.home}/${RIG_WORK_DIR.slice("/root/".length)}/${engine}`;
      expect((await fs.readdir(onNode)).length).toBeGreaterThan(0);
      await expect(fs.stat(`${other.home}/${RIG_WORK_DIR.slice("/root/".length)}/${engine}`)).rejects.toThrow();
    }
    const view = await status(fleet.stateDir, fleet.dir);
    expect(view.engines.map((e) => [e.engine, e.phase])).toEqual([
      ["engine-1", "captured"],
      ["engine-2", "captured"],
    ]);
    // With no controller running, status checks each engine on its own node, over ssh.
    expect(view.engines.map((e) => e.live?.liveness)).toEqual(["alive", "alive"]);
    // KV moved from host A's prefill to host B's decode over A's side channel address (issue 11 item 6).
    for (const e of view.engines) {
      expect(kvOf(e), e.engine).toMatchObject({ status: "True" });
      const proof = JSON.parse(await fs.readFile(`${e.run_dir}/kv-transfer.json`, "utf8"));
      expect(proof).toMatchObject({ passed: true, side_channel: { host: a.address, port: RIG_PORTS.nixl } });
      expect(proof.prefill.node).not.toBe(proof.decode.node);
    }
    // Each engine's attestation sidecar runs on the engine's own node (its namespace), probed by the controller.
    const sidecars = await sidecarProcesses(fleet.stateDir);
    expect(sidecars.map((s) => s.engine).sort()).toEqual(["engine-1", "engine-2"]);
    for (const s of sidecars) {
      const e = view.engines.find((x) => x.engine === s.engine)!;
      expect(await netnsOf(s.pid)).toBe(await (s.engine === "engine-1" ? a : b).netnsInode());
      expect(e.layout?.attestation).toMatchObject({ sidecar_pid: s.pid, node: (s.engine === "engine-1" ? a : b).name });
    }
  });

  it("a second reconcile --once starts nothing: the engines are found on their nodes", async () => {
    const before = await pidsByEngine(fleet.stateDir);
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    expect(await pidsByEngine(fleet.stateDir)).toEqual(before);
    expect((await sidecarProcesses(fleet.stateDir)).length).toBe(2);
  });

  /**
   * A no-op `reconcile --once` with every ssh client the CLI starts going through a wrapper on PATH that
   * notes the node and what the call is (master, scan, exit, check, command) before it runs the real ssh;
   * `atMaster(callsFile)` is shell a master's call runs first ($dest is its node). The calls, "node kind" a line.
   */
  async function noopThroughSshWrapper(atMaster = (_calls: string) => ":"): Promise<string[]> {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-ssh-calls-"));
    const calls = path.join(dir, "calls");
    const wrapper = `#!/bin/sh
kind=command; dest=; last=
for a do case $a in root@*) dest=$a;; esac; last=$a; done
case " $* " in *" -O exit "*) kind=exit;; *" -O check "*) kind=check;; *"read_environs(leaders"*) kind=scan;; esac
[ "$last" = true ] && kind=master
printf '%s %s\\n' "$dest" "$kind" >> ${calls}
[ $kind = master ] && { ${atMaster(calls)}
}
exec /usr/bin/ssh "$@"
`;
    await fs.writeFile(path.join(dir, "ssh"), wrapper, { mode: 0o755 });
    try {
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
        PATH: `${dir}:${process.env["PATH"]}`,
      });
      expect(r.code, r.stderr).toBe(0);
      return (await fs.readFile(calls, "utf8")).trim().split("\n");
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  }

  it("a no-op reconcile --once runs per node the master, one scan and the master's exit: no command per engine", async () => {
    const lines = await noopThroughSshWrapper();
    for (const host of [a, b]) {
      const kinds = lines.filter((l) => l.startsWith(`${host.ssh.destination} `)).map((l) => l.split(" ")[1]);
      // -O check is asked until the master is gone: once, or a few times.
      expect(
        kinds.filter((k) => k !== "check"),
        kinds.join(" "),
      ).toEqual(["master", "scan", "exit"]);
      expect(kinds.filter((k) => k === "check").length).toBeGreaterThan(0);
    }
    expect(lines.filter((l) => !l.startsWith(a.ssh.destination) && !l.startsWith(b.ssh.destination))).toEqual([]);
  });

  it("a no-op lists its nodes at once: neither node's master waits for the other's scan", async () => {
    // Each node's master goes on only once the other node's master has begun (20 s at most, then it notes
    // that it went alone): listing one node after the other, the first master would wait out the 20 s.
    const lines = await noopThroughSshWrapper(
      (calls) => `i=0
while [ $i -lt 400 ] && [ "$(grep -v "^$dest " ${calls} | grep -c ' master$')" = 0 ]; do sleep 0.05; i=$((i+1)); done
[ $i -lt 400 ] || printf '%s alone\\n' "$dest" >> ${calls}`,
    );
    expect(lines.filter((l) => l.endsWith(" master")).length).toBe(2);
    expect(lines.filter((l) => l.endsWith(" alone"))).toEqual([]);
  });

  it("host B unreachable blocks only engine-2 (NodeReachable=False); back again, nothing restarts", async () => {
    const before = await pidsByEngine(fleet.stateDir);
    // No master connection outlives a CLI run (the controller closes them), so every run after
    // the listener stops meets "Connection refused", as with a host that went away.
    await b.stopSshd();
    try {
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
        NARWHAL_ONCE_OUTWAIT_MS: "3000",
      });
      expect(r.code).toBe(2);
      expect(r.stdout + r.stderr).toMatch(new RegExp(`engine-2: node ${b.name} cannot be reached`));
      const view = await status(fleet.stateDir, fleet.dir);
      const e2 = view.engines.find((e) => e.engine === "engine-2")!;
      const e1 = view.engines.find((e) => e.engine === "engine-1")!;
      expect(e2.conditions.find((c) => c.type === "NodeReachable")).toMatchObject({ status: "False" });
      expect(e1.conditions.find((c) => c.type === "NodeReachable")?.status ?? "True").toBe("True");
      expect(e1.phase).toBe("captured");
    } finally {
      await b.startSshd();
    }
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    expect(await pidsByEngine(fleet.stateDir)).toEqual(before);
    const view = await status(fleet.stateDir, fleet.dir);
    const e2 = view.engines.find((e) => e.engine === "engine-2")!;
    expect(e2.conditions.find((c) => c.type === "NodeReachable")).toMatchObject({ status: "True" });
  });
});

describe("a controller SIGKILLed mid-start, then rerun", () => {
  let fleet: RigFleet;

  afterAll(async () => {
    if (fleet) await teardown(fleet.stateDir);
  });

  for (const point of [
    { name: "native:spawn:after", hit: 1 },
    { name: "native:spawn:after", hit: 2 },
  ]) {
    it(`leaves exactly one engine per record across both hosts (killed at ${point.name}@${point.hit})`, async () => {
      if (fleet) await teardown(fleet.stateDir);
      fleet = await rigFleet([a, b]);
      await killAt(fleet, point);
      const r = await reconcileOnce(fleet);
      expect(r.code, r.stderr).toBe(0);
      const procs = await engineProcesses(fleet.stateDir);
      expect(procs.map((p) => p.engine).sort()).toEqual(["engine-1", "engine-2"]);
      const byEngine = Object.fromEntries(procs.map((p) => [p.engine, p.pid]));
      expect(await netnsOf(byEngine["engine-1"]!)).toBe(await a.netnsInode());
      expect(await netnsOf(byEngine["engine-2"]!)).toBe(await b.netnsInode());
    });
  }
});

describe("a host key that changed", () => {
  let fleet: RigFleet;

  afterAll(async () => {
    if (fleet) await teardown(fleet.stateDir);
  });

  it("is refused with an error naming the node, and nothing starts there", async () => {
    // Host A's key changes after the fleet above is torn down; the rig's known_hosts still has the old one.
    await a.rotateHostKey();
    fleet = await rigFleet([a]);
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], {
      NARWHAL_ONCE_OUTWAIT_MS: "3000",
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(new RegExp(`${a.name}.*host key|host key.*${a.name}`, "i"));
    expect(await engineProcesses(fleet.stateDir)).toEqual([]);
    // What runs on the node cannot be listed, so its engine is not created there on a guess: said so, naming the node.
    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(
      new RegExp(
        `not converged: engine-1: not created: what runs there cannot be listed, node ${a.name} has a host key narwhal refuses`,
      ),
    );
  });
});
