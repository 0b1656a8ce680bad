// The native backend on an engine's own node, over ssh (test/rig: network
// namespaces with their own sshd; the controller reaches them only over SSH):
// the check and the start run on host A, in host A's network namespace, from a
// run directory under host A's work_dir; a second ensureStarted adopts, never
// starts twice; stop ends it there. An engine with the same launch token on host
// B is host B's, never adopted for host A's node.
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NativeBackend, PROCESS_FILE } from "../../src/backends/native.js";
import { checkInput, parseScriptResult } from "../../src/phases/check.js";
import { readPlan } from "../../src/phases/prepare.js";
import type { LaunchPlan } from "../../src/phases/plan.js";
import type { EngineHandle, PreparedRun } from "../../src/phases/types.js";
import { NodeHosts } from "../../src/hosts/node-hosts.js";
import { NodeUnreachable, PhaseError, type NodeFault } from "../../src/errors.js";
import { procStatOn } from "../../src/backends/native-host.js";
import { loadDesired } from "../../src/desired/load.js";
import { checkScriptPath } from "../../src/app.js";
import { createRig, type Rig, type RigHost } from "../rig/rig.js";
import { simFleet, type SimFleet } from "./sim-fleet.js";
import { runCli } from "./cli.js";

const CLIENT_ENV = { PATH: "/usr/local/bin:/usr/bin:/bin" };
/** Under /root: each rig host's own directory (host.home on the controller's side), so a file there is on that host alone. */
const WORK_DIR = "/root/narwhal-runs";

let rig: Rig;
let a: RigHost;
let b: RigHost;
let fleet: SimFleet;
let hosts: NodeHosts;
let backend: NativeBackend;
let plan: LaunchPlan;
const started: Array<{ handle: EngineHandle }> = [];

/** `stat -L -c %i /proc/PID/ns/net`, read in the host's namespace (an assertion, not the code under test). */
async function netnsOf(h: RigHost, pid: number): Promise<string> {
  const r = await h.exec(["stat", "-L", "-c", "%i", `/proc/${pid}/ns/net`]);
  return r.stdout.trim();
}

/** A prepared run for the rig's node: `narwhal engine prepare` into a controller run directory, as data. */
async function prepared(name: string): Promise<PreparedRun> {
  const dir = path.join(fleet.stateDir, "runs", "engine-1", name);
  const r = await runCli(
    ["engine", "prepare", "--desired", fleet.dir, "--engine", "engine-1", "--out", dir, "--state", fleet.stateDir],
    {},
  );
  expect(r.code, r.stderr).toBe(0);
  const { plan: p, sha256 } = await readPlan(dir);
  plan = p;
  return { engine: "engine-1", dir, input_hash: "rig", plan_sha256: sha256, launch_token: p.launch_token };
}

/** The same plan (same launch token) in a second controller run directory, as a copy of the first. */
async function copyOf(run: PreparedRun, name: string): Promise<PreparedRun> {
  const dir = path.join(path.dirname(run.dir), name);
  await fs.cp(run.dir, dir, { recursive: true });
  return { ...run, dir };
}

describe("native backend on a node reached over ssh", () => {
  beforeAll(async () => {
    rig = await createRig({ hosts: 2 });
    [a, b] = rig.hosts as [RigHost, RigHost];
    fleet = await simFleet({ engines: [{}] });
    // The plan names host A's node (the fleet's one node, renamed); its ssh block is learned below.
    const fleetFile = path.join(fleet.dir, "fleet.json");
    const doc = JSON.parse(await fs.readFile(fleetFile, "utf8"));
    doc.nodes[0].name = a.name;
    await fs.writeFile(fleetFile, JSON.stringify(doc, null, 2));
    const spec = (await loadDesired(fleet.dir)).specs[0]!;
    // This test's ssh control sockets live apart from the state dir's: a `down` that reaches a node makes its own.
    hosts = new NodeHosts({ stateDir: path.join(path.dirname(fleet.dir), "test-ssh"), clientEnv: CLIENT_ENV });
    hosts.learn([a, b].map((h) => ({ node: { ...spec.node, name: h.name, ssh: h.ssh, work_dir: WORK_DIR } })));
    backend = new NativeBackend({ stateDir: fleet.stateDir, hostEnv: CLIENT_ENV, logCapBytes: 1 << 20, hosts });
  }, 600_000);

  afterAll(async () => {
    for (const { handle } of started) await backend?.stop(handle, 1_000).catch(() => undefined);
    await hosts?.close();
    await rig?.teardown();
    if (fleet) await fs.rm(path.dirname(fleet.dir), { recursive: true, force: true });
  });

  it("checks, starts, adopts, lists and stops the engine on host A only", async () => {
    const run = await prepared("rig-a");
    const nodeDir = hosts.runDirOnNode(a.name, run.dir);
    expect(nodeDir).toBe(`${WORK_DIR}/engine-1/rig-a`);
    const onA = path.join(a.home, "narwhal-runs/engine-1/rig-a");
    const signal = new AbortController().signal;

    // The check: its script and input are copied to host A and run there.
    const input = path.join(run.dir, "check-input.json");
    await fs.writeFile(input, JSON.stringify(checkInput(plan, run.plan_sha256)) + "\n", { mode: 0o600 });
    const out = await backend.runCheck(run, plan, checkScriptPath(), input, signal);
    expect(out.exit_code, out.stderr).toBe(0);
    expect(parseScriptResult(out.stdout)).toMatchObject({ ok: true });
    // The script is not the run's own file: named by its digest, so a newer narwhal's never meets an older copy.
    expect((await fs.readdir(onA)).sort()).toEqual([
      "check-input.json",
      expect.stringMatching(/^check_runtime\.[0-9a-f]{12}\.py$/),
      "engine-launch.json",
      "engine-runtime.json",
      "engine.env",
      "launch.json",
    ]);
    expect((await fs.stat(path.join(onA, "engine.env"))).mode & 0o777).toBe(0o600);
    // The role-specific launch record travels with the plan (seed 003 §16), its sources beside it: byte for byte.
    for (const f of ["engine-launch.json", "engine-runtime.json"]) {
      expect((await fs.stat(path.join(onA, f))).mode & 0o777).toBe(0o600);
      expect(await fs.readFile(path.join(onA, f))).toEqual(await fs.readFile(path.join(run.dir, f)));
    }
    expect((await fs.stat(path.join(onA, "launch.json"))).mode & 0o777).toBe(0o400);
    // Nothing of host A's run directory is on host B.
    await expect(fs.stat(path.join(b.home, "narwhal-runs"))).rejects.toMatchObject({ code: "ENOENT" });

    const handle = await backend.ensureStarted(run, plan, signal);
    started.push({ handle });
    expect(handle).toMatchObject({ kind: "native", node: a.name });
    const pid = (handle as { pid: number }).pid;
    expect(await netnsOf(a, pid)).toBe(await a.netnsInode());
    expect(await fs.readFile(path.join(onA, "launch.json"))).toEqual(
      await fs.readFile(path.join(run.dir, "launch.json")),
    );
    expect(JSON.parse(await fs.readFile(path.join(run.dir, PROCESS_FILE), "utf8"))).toEqual(handle);

    // Again: the same engine, nothing started twice.
    expect(await backend.ensureStarted(run, plan, signal)).toEqual(handle);
    expect(await backend.isAlive(handle)).toBe(true);
    const owned = await backend.listOwned();
    expect(owned.filter((o) => o.launch_token === run.launch_token)).toEqual([
      expect.objectContaining({ engine: "engine-1", run_dir: run.dir, handle }),
    ]);
    expect((await backend.describeProcess(handle)).args.slice(0, 1)).toEqual([plan.command[0]]);
    expect(await backend.processStartTime(handle)).toBeGreaterThan(Date.now() / 1000 - 600);

    await backend.stop(handle, 5_000);
    expect(await backend.isAlive(handle)).toBe(false);
    // Gone, or a zombie waiting for a reaper (the rig's pid 1 may not reap): not running either way.
    const left = (await a.exec(["sh", "-c", `cat /proc/${pid}/stat 2>/dev/null`])).stdout;
    expect(left === "" || left.slice(left.lastIndexOf(")") + 2).startsWith("Z")).toBe(true);
    // The log stayed on host A and is copied back as evidence.
    const log = await backend.startupLog(run, handle);
    expect(log.where).toBe(path.join(run.dir, "engine.log"));
    expect(await fs.readFile(path.join(onA, "engine.log"), "utf8")).toContain(log.text.split("\n")[0]!);
  }, 120_000);

  it("an engine with the same launch token on host B is not host A's", async () => {
    const runA = await prepared("rig-token-a");
    const runB = await copyOf(runA, "rig-token-b");
    const signal = new AbortController().signal;
    const planB: LaunchPlan = { ...plan, node: { ...plan.node, name: b.name } };
    const onB = await backend.ensureStarted(runB, planB, signal);
    started.push({ handle: onB });
    expect(await netnsOf(b, (onB as { pid: number }).pid)).toBe(await b.netnsInode());

    const onA = await backend.ensureStarted(runA, plan, signal);
    started.push({ handle: onA });
    expect((onA as { pid: number }).pid).not.toBe((onB as { pid: number }).pid);
    expect(onA).toMatchObject({ node: a.name });
    expect(await netnsOf(a, (onA as { pid: number }).pid)).toBe(await a.netnsInode());
    const owned = (await backend.listOwned()).filter((o) => o.launch_token === runA.launch_token);
    expect(owned.map((o) => (o.handle as { node?: string }).node).sort()).toEqual([a.name, b.name].sort());
    for (const h of [onA, onB]) await backend.stop(h, 5_000);
    expect(await backend.isAlive(onA)).toBe(false);
    expect(await backend.isAlive(onB)).toBe(false);
  }, 120_000);

  it("refuses a node's run file with other bytes, naming it, and starts nothing", async () => {
    const run = await prepared("rig-immutable");
    const onA = path.join(a.home, "narwhal-runs/engine-1/rig-immutable");
    await fs.mkdir(onA, { recursive: true });
    await fs.writeFile(path.join(onA, "engine.env"), "NARWHAL_SOMEONE_ELSES=1\n", { mode: 0o600 });
    const err: unknown = await backend.ensureStarted(run, plan, new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PhaseError);
    expect(err).toMatchObject({
      step: "start",
      message: expect.stringContaining(`${WORK_DIR}/engine-1/rig-immutable/engine.env on node ${a.name}`),
      fix: expect.stringContaining(`remove ${WORK_DIR}/engine-1/rig-immutable there`),
    });
    expect(await fs.readFile(path.join(onA, "engine.env"), "utf8")).toBe("NARWHAL_SOMEONE_ELSES=1\n");
    await expect(fs.stat(path.join(run.dir, PROCESS_FILE))).rejects.toMatchObject({ code: "ENOENT" });
    expect((await backend.listOwned()).filter((o) => o.launch_token === run.launch_token)).toEqual([]);
  }, 60_000);

  it("the orphan sweep skips a node it cannot reach, says so, and still lists the others", async () => {
    const run = await prepared("rig-sweep");
    const handle = await backend.ensureStarted(run, plan, new AbortController().signal);
    started.push({ handle });
    const warnings: string[] = [];
    const logged = new NativeBackend({
      stateDir: fleet.stateDir,
      hostEnv: CLIENT_ENV,
      logCapBytes: 1 << 20,
      hosts,
      log: { warn: (msg: string) => warnings.push(msg) },
    });
    // Sessions already open outlive a stopped sshd: end B's master first, so the next command connects anew.
    await hosts.access(b.name).close();
    await b.stopSshd();
    try {
      const owned = await logged.listOwned();
      expect(owned.filter((o) => o.launch_token === run.launch_token).map((o) => o.handle)).toEqual([handle]);
      expect(warnings).toEqual([expect.stringContaining(`orphan sweep skips node ${b.name}`)]);
      // A caller that can tell an unlisted node (the controller's World) is told it, by its node fault.
      const unlisted: NodeFault[] = [];
      const again = await logged.listOwned({ unlisted: (f) => unlisted.push(f) });
      expect(again.filter((o) => o.launch_token === run.launch_token).map((o) => o.handle)).toEqual([handle]);
      expect(unlisted).toEqual([expect.objectContaining({ node: b.name, reason: "unreachable" })]);
      expect(warnings).toHaveLength(1);
    } finally {
      await b.startSshd();
    }
    await backend.stop(handle, 5_000);
    expect(await backend.isAlive(handle)).toBe(false);
  }, 60_000);

  it("answers whether several engines on a node run from one process table of it, not a read each", async () => {
    // Hosts of its own whose ssh clients go through a wrapper on PATH that notes each one.
    const dir = await fs.mkdtemp(path.join(path.dirname(fleet.dir), "alive-"));
    const calls = path.join(dir, "calls");
    await fs.mkdir(path.join(dir, "bin"));
    const wrapper = `#!/bin/sh\nprintf '%s\\n' "$*" >> ${calls}\nexec /usr/bin/ssh "$@"\n`;
    await fs.writeFile(path.join(dir, "bin/ssh"), wrapper, { mode: 0o755 });
    const env = { PATH: `${dir}/bin:${CLIENT_ENV.PATH}` };
    const own = new NodeHosts({ stateDir: path.join(dir, "state"), clientEnv: env });
    own.learn([{ node: hosts.spec(a.name)! }]);
    const ownBackend = new NativeBackend({ stateDir: fleet.stateDir, hostEnv: env, logCapBytes: 1 << 20, hosts: own });
    const host = own.access(a.name);
    const pids: number[] = [];
    try {
      for (let i = 0; i < 3; i++)
        pids.push((await host.spawnDetached(["sleep", "600"], { cwd: "/root", logFile: `/root/alive-${i}.log` })).pid);
      const boot = await host.bootId();
      const handles = await Promise.all(
        pids.map(async (pid) => {
          const stat = (await host.readFile(`/proc/${pid}/stat`)).toString();
          const startTicks = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
          return {
            kind: "native" as const,
            pid,
            pgid: pid,
            boot_id: boot,
            start_ticks: startTicks,
            launch_token: `t${pid}`,
            node: a.name,
          };
        }),
      );
      // The last is a process that ran once under that pid: another start tick.
      const gone = { ...handles[0]!, start_ticks: handles[0]!.start_ticks + 1 };
      const perEngine = await Promise.all([...handles, gone].map((h) => ownBackend.isAlive(h)));
      await host.listProcesses(); // the node's helper interpreter is looked up once: not what is counted
      await fs.writeFile(calls, "");
      expect(await ownBackend.aliveAll([...handles, gone])).toEqual([true, true, true, false]);
      expect(perEngine).toEqual([true, true, true, false]);
      // The node's boot id (unless read in the last 2 s) and its process list: not one command an engine.
      const commands = (await fs.readFile(calls, "utf8")).split("\n").filter((l) => l.includes(" -- "));
      expect(commands.length).toBeGreaterThanOrEqual(1);
      expect(commands.length).toBeLessThanOrEqual(2);
    } finally {
      if (pids.length) await host.run(["kill", ...pids.map(String)]).catch(() => undefined);
      await own.close();
      await fs.rm(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("a node that does not answer is no proof of a death: its stat read and isAlive reject, naming the node", async () => {
    const host = hosts.access(b.name);
    const { pid } = await host.spawnDetached(["sleep", "600"], { cwd: "/root", logFile: "/root/unanswered.log" });
    const stat = await procStatOn(host, pid);
    expect(stat).not.toBeNull();
    const handle = {
      kind: "native" as const,
      pid,
      pgid: pid,
      boot_id: await host.bootId(),
      start_ticks: stat!.startTicks,
      launch_token: "unanswered",
      node: b.name,
    };
    expect(await backend.isAlive(handle)).toBe(true);
    await host.close(); // no master left: the next command connects anew, and meets the stopped sshd
    await b.stopSshd();
    try {
      // Taken for gone, a running engine would be replaced and a stop would think it had ended it.
      await expect(procStatOn(host, pid)).rejects.toBeInstanceOf(NodeUnreachable);
      await expect(backend.isAlive(handle)).rejects.toMatchObject({ node: b.name });
    } finally {
      await b.startSshd();
      await host.run(["kill", String(pid)]);
    }
    expect(await procStatOn(host, pid).then((s) => s?.state ?? null)).toSatisfy(
      (s: string | null) => s === null || s === "Z",
    );
  }, 60_000);

  it("names the node's own interpreter in the runtime identity", async () => {
    const spec = (await loadDesired(fleet.dir)).specs[0]!;
    // A link only host A has (its own /root): the identity follows it there, to the real interpreter.
    await fs.symlink(await fs.realpath(spec.python), path.join(a.home, "python-on-a"));
    const onA = { ...spec, node: hosts.spec(a.name)!, python: "/root/python-on-a" };
    const real = { ...spec, node: hosts.spec(a.name)!, python: await fs.realpath(spec.python) };
    expect(await backend.runtimeIdentity(onA)).toBe(await backend.runtimeIdentity(real));
    // On host B the link does not exist: the identity is by the configured path, another one.
    const onB = { ...onA, node: hosts.spec(b.name)! };
    expect(await backend.runtimeIdentity(onB)).not.toBe(await backend.runtimeIdentity(real));
  }, 60_000);

  it("down learns the nodes from desired/ and stops the engine on host A", async () => {
    const run = await prepared("rig-down");
    const handle = await backend.ensureStarted(run, plan, new AbortController().signal);
    started.push({ handle });
    // desired/ as the operator writes it for this fleet: host A's node record with its ssh block.
    const desired = path.join(path.dirname(fleet.dir), "desired-rig");
    await fs.cp(fleet.dir, desired, { recursive: true });
    const fleetFile = path.join(desired, "fleet.json");
    const doc = JSON.parse(await fs.readFile(fleetFile, "utf8"));
    Object.assign(doc.nodes[0], { ssh: a.ssh, work_dir: WORK_DIR });
    await fs.writeFile(fleetFile, JSON.stringify(doc, null, 2));
    // The rig's hosts share one process table, so a local sweep would see the engine too: what proves down
    // went to host A over ssh is its control socket directory under the state dir.
    const controlDir = path.join(fleet.stateDir, "ssh");
    await expect(fs.stat(controlDir)).rejects.toMatchObject({ code: "ENOENT" });
    const r = await runCli(["down", "--state", fleet.stateDir, "--format", "json"], {
      ...CLIENT_ENV,
      NARWHAL_DESIRED: desired,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).stopped).toEqual(["engine-1"]);
    expect((await fs.stat(controlDir)).isDirectory()).toBe(true);
    expect(await backend.isAlive(handle)).toBe(false);
  }, 60_000);
});
