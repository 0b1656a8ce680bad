// The container backend on nodes reached over ssh (test/rig with a dockerd per
// host): a node's default ssh:// Docker endpoint is dialled through OpenSSH with
// the node's own ssh settings (docker system dial-stdio over its master), so an
// engine's container runs on that node's daemon, in that node's network
// namespace; the endpoint's typed errors are the node's (a changed host key
// refused, terminally; a node whose sshd or daemon is down outwaited); a master that dies
// between calls is dialled anew by the next one. And the rig's own promise for
// its dockerds: a killed run's daemons, containers and mounts are swept.
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContainerBackend } from "../../src/backends/container.js";
import { DockerCallError } from "../../src/backends/docker-calls.js";
import { loadConfig } from "../../src/config.js";
import { nodeSpec } from "../../src/desired/spec.js";
import { sshDockerHost } from "../../src/desired/node-host.js";
import type { EngineSpec } from "../../src/desired/types.js";
import { HostKeyRejected, NodeUnreachable, type NodeFault } from "../../src/errors.js";
import { NodeHosts } from "../../src/hosts/node-hosts.js";
import { buildLaunchPlan, type LaunchPlan } from "../../src/phases/plan.js";
import type { EngineHandle, PreparedRun } from "../../src/phases/types.js";
import { engineSpec, inspection, planInputs } from "../phases/plan-fixtures.js";
import { mountsUnder } from "../docker/mounts.js";
import { rigCgroupNames } from "../rig/cgroups.js";
import { heldByKilledRun } from "../rig/killed-run.js";
import { ownerDead } from "../rig/net.js";
import { createRig, sshRun, type Rig, type RigHost } from "../rig/rig.js";
import { run } from "../rig/run.js";

let rig: Rig;
let a: RigHost;
let b: RigHost;
let stateDir = "";
let hosts: NodeHosts;
let backend: ContainerBackend;
const specs: Record<string, EngineSpec> = {};
const LONG = AbortSignal.timeout(600_000);

/** An engine on the rig host's node record: its ssh block, and the ssh:// Docker endpoint it defaults to. */
function specOn(h: RigHost, engine: string): EngineSpec {
  const node = nodeSpec(stateDir, { name: h.name, ssh: h.ssh } as Parameters<typeof nodeSpec>[1]);
  const base = engineSpec({ name: engine, node, backend: "container" });
  return { ...base, launch: { ...base.launch, image: rig.simImage!.id } };
}

/** The spec's plan, made to run on a rig host: no GPU devices, no model mount, a command that just stays up. */
function planFor(spec: EngineSpec, token: string): LaunchPlan {
  const { plan } = buildLaunchPlan(
    planInputs({ spec, inspection: inspection({ image_id: rig.simImage!.id }), launchToken: token }),
  );
  return {
    ...plan,
    mounts: [],
    devices: [],
    secret_environment: [],
    command: ["python3", "-c", "import time; time.sleep(600)"],
  };
}

async function preparedRun(engine: string, plan: LaunchPlan): Promise<PreparedRun> {
  const dir = path.join(stateDir, "runs", engine, `20261201T000000Z-${plan.launch_token}`);
  await fs.mkdir(dir, { recursive: true });
  return { engine, dir, input_hash: plan.input_hash, plan_sha256: "0".repeat(64), launch_token: plan.launch_token };
}

const endpointOf = (h: RigHost) => sshDockerHost(h.ssh);
/** What a call failed with (its resolution when it did not). */
const failureOf = (p: Promise<unknown>): Promise<unknown> => p.catch((e: unknown) => e);

beforeAll(async () => {
  const started = Date.now();
  rig = await createRig({ hosts: 2, docker: true });
  [a, b] = rig.hosts as [RigHost, RigHost];
  process.stderr.write(
    `[container-rig] rig with 2 dockerds in ${Date.now() - started} ms (simulator image on both: ${rig.simImage?.ms} ms)\n`,
  );
  stateDir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-cr-"));
  const config = loadConfig({ state: stateDir }, { PATH: process.env.PATH, HOME: process.env.HOME });
  hosts = new NodeHosts({ stateDir, clientEnv: config.hostEnv });
  backend = new ContainerBackend({
    stateDir,
    docker: config.docker,
    stopGraceMs: 2_000,
    logCapBytes: config.engineLogCapBytes,
    hosts,
  });
  specs.a = specOn(a, "engine-a");
  specs.b = specOn(b, "engine-b");
  backend.knowHosts([specs.a, specs.b]);
});

afterAll(async () => {
  await hosts?.close();
  await rig?.teardown();
  if (stateDir) await fs.rm(stateDir, { recursive: true, force: true });
});

describe("container engines on nodes reached over ssh", () => {
  let handle: EngineHandle;

  it("a node's default endpoint is its own daemon: the engine's container runs in that node's network namespace", async () => {
    expect(specs.a!.node.docker_host).toBe(endpointOf(a));
    // The image is inspected over the endpoint: the node's daemon holds it, under the id the rig copied.
    expect(await backend.runtimeIdentity(specs.a!, LONG)).toBe(rig.simImage!.id);

    const plan = planFor(specs.a!, "tok-rig-a");
    handle = await backend.ensureStarted(await preparedRun("engine-a", plan), plan, LONG);
    expect(handle).toMatchObject({ kind: "container", docker_host: endpointOf(a) });
    if (handle.kind !== "container") throw new Error("not a container handle");
    expect(await backend.isAlive(handle)).toBe(true);

    // Read on host A itself (its ssh session's /var/run/docker.sock is A's daemon): the main process's namespace is A's.
    const pid = (await sshRun(a, ["docker", "inspect", "-f", "{{.State.Pid}}", handle.container_id])).stdout.trim();
    expect(Number(pid)).toBeGreaterThan(0);
    const netns = await a.exec(["stat", "-Lc", "%i", `/proc/${pid}/ns/net`]);
    expect(netns.stdout.trim()).toBe(await a.netnsInode());
    expect(netns.stdout.trim()).not.toBe(await b.netnsInode());
    // Node B's daemon holds nothing of it.
    expect(await b.docker!.client.listContainers({ all: true })).toEqual([]);

    const owned = await backend.listOwned();
    expect(owned).toEqual([
      expect.objectContaining({
        engine: "engine-a",
        handle: expect.objectContaining({ container_id: handle.container_id, docker_host: endpointOf(a) }),
      }),
    ]);

    await backend.stop(handle, 2_000);
    await expect(a.docker!.client.getContainer(handle.container_id).inspect()).rejects.toMatchObject({
      statusCode: 404,
    });
    expect(await backend.listOwned()).toEqual([]);
  });

  it("a node's containers' path stats ride one dial-stdio session, pipelined, and say what dockerode's say", async () => {
    const docker = a.docker!.client;
    const Cmd = ["python3", "-c", "import time; time.sleep(600)"];
    const made = await Promise.all(
      [0, 1, 2].map(async () => {
        const c = await docker.createContainer({ Image: rig.simImage!.id, Cmd, HostConfig: { NetworkMode: "none" } });
        await c.start();
        return c;
      }),
    );
    // A backend of its own whose ssh clients go through a wrapper on PATH that notes each one's arguments.
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-crw-"));
    const calls = path.join(dir, "calls");
    await fs.mkdir(path.join(dir, "bin"));
    const wrapper = `#!/bin/sh\nprintf '%s\\n' "$*" >> ${calls}\nexec /usr/bin/ssh "$@"\n`;
    await fs.writeFile(path.join(dir, "bin/ssh"), wrapper, { mode: 0o755 });
    const config = loadConfig({ state: dir }, { PATH: `${dir}/bin:${process.env.PATH}`, HOME: process.env.HOME });
    const ownHosts = new NodeHosts({ stateDir: dir, clientEnv: config.hostEnv });
    const own = new ContainerBackend({
      stateDir: dir,
      docker: config.docker,
      stopGraceMs: 2_000,
      logCapBytes: 1 << 20,
      hosts: ownHosts,
    });
    try {
      own.knowHosts([specs.a!]);
      const reads = own.client(endpointOf(a));
      await reads.ping(); // the node's master is up: what follows is the stats' alone
      await fs.writeFile(calls, "");
      const file = "/etc/hostname";
      const stats = await Promise.all([
        ...made.map((c) => reads.statPath(c.id, file)),
        reads.statPath(made[0]!.id, "/no/such"),
      ]);
      const dials = (await fs.readFile(calls, "utf8")).split("\n").filter((l) => l.includes("dial-stdio"));
      expect(dials.length).toBe(1);
      expect(stats.at(-1)).toBeNull();
      for (const [i, c] of made.entries()) {
        // dockerode's HEAD, straight to the node's daemon socket.
        const res = (await c.infoArchive({ path: file })) as NodeJS.ReadableStream & {
          headers: Record<string, string>;
        };
        res.resume();
        const header = res.headers["x-docker-container-path-stat"]!;
        expect(stats[i]).toEqual(JSON.parse(Buffer.from(header, "base64").toString("utf8")));
        expect(stats[i]).toMatchObject({ name: "hostname" });
      }
    } finally {
      await ownHosts.close();
      await Promise.all(made.map((c) => c.remove({ force: true })));
      await fs.rm(dir, { recursive: true, force: true });
    }
  });

  it("a master connection that dies between calls is dialled anew by the next call", async () => {
    const docker = backend.client(endpointOf(b));
    await docker.ping();
    // The control sockets (state/ssh also keeps each node's helper interpreter lookup).
    const entries = await fs.readdir(path.join(stateDir, "ssh"), { withFileTypes: true });
    const masters = entries.filter((e) => e.isSocket()).map((e) => e.name);
    expect(masters.length).toBe(2); // one per node, both endpoints over it
    for (const sock of masters) {
      const r = await run(["ssh", "-S", path.join(stateDir, "ssh", sock), "-O", "check", "narwhal-master"]);
      const pid = Number(/pid=(\d+)/.exec(r.stderr)?.[1]);
      expect(pid, r.stderr).toBeGreaterThan(0);
      process.kill(pid, "SIGKILL"); // as a crash of the master, or the node rebooting under it, would
    }
    await docker.ping();
  });

  it("a node whose Docker daemon is down is outwaited, named, and used again once it is back", async () => {
    await b.docker!.halt();
    const docker = backend.client(endpointOf(b));
    // Through dockerode (ping) and through the observation's reads (list, path stat) alike.
    for (const call of [() => docker.ping(), () => docker.list([]), () => docker.statPath("0123456789ab", "/etc")]) {
      const down: unknown = await failureOf(call());
      expect(down).toBeInstanceOf(DockerCallError);
      expect(down).toMatchObject({ failure: "outwait" });
      expect((down as Error).message).toMatch(new RegExp(`node ${b.name}: docker system dial-stdio exited`));
    }
    await b.docker!.start();
    await docker.ping();
    expect(await docker.list([])).toEqual([]);
  });

  it("a node whose sshd is down is outwaited, named; a changed host key is refused, terminally, naming the node", async () => {
    await hosts.close(); // no master left (as after ControlPersist): the next call connects afresh
    await b.stopSshd();
    const down: unknown = await failureOf(backend.client(endpointOf(b)).ping());
    expect(down).toBeInstanceOf(NodeUnreachable);
    expect(down).toMatchObject({ node: b.name, failure: "outwait" });
    await b.startSshd();
    await backend.client(endpointOf(b)).ping();

    await hosts.close();
    await a.rotateHostKey();
    const refused: unknown = await failureOf(backend.client(endpointOf(a)).ping());
    expect(refused).toBeInstanceOf(HostKeyRejected);
    expect(refused).toMatchObject({ node: a.name, reason: "host-key", failure: "terminal" });
    expect((refused as HostKeyRejected).message).toContain(a.ssh.known_hosts_file);
    // Listing owned engines meets the same refusal rather than reporting node A empty.
    await expect(backend.listOwned()).rejects.toBeInstanceOf(HostKeyRejected);
    // A caller that can tell an unlisted node is told node A by its fault; node B is listed still.
    const unlisted: NodeFault[] = [];
    await expect(backend.listOwned({ unlisted: (f) => unlisted.push(f) })).resolves.toBeInstanceOf(Array);
    expect(unlisted).toEqual([expect.objectContaining({ node: a.name, reason: "host-key" })]);
  });
});

describe("a test run SIGKILLed while its hosts' dockerds run containers", () => {
  it("leaves daemons, containers and their mounts behind, and the next createRig removes them all", async () => {
    // One host with a container on the host network and one with a network namespace of its own.
    const held = await heldByKilledRun<{ netns: string; dir: string; pids: number[] }>([
      "const rig = await createRig({ hosts: 1, docker: true });",
      "const docker = rig.hosts[0].docker.client;",
      "const pids = [];",
      'for (const NetworkMode of ["host", "none"]) {',
      '  const Cmd = ["python3", "-c", "import time; time.sleep(600)"];',
      "  const c = await docker.createContainer({ Image: rig.simImage.tag, Cmd, HostConfig: { NetworkMode } });",
      "  await c.start();",
      "  pids.push((await c.inspect()).State.Pid);",
      "}",
      "say({ netns: rig.hosts[0].netns, dir: rig.dir, pids });",
    ]);
    // No exit handler ran: the containers live on (their shims are no children of the run), their layers mounted.
    expect(held.pids.filter((pid) => !ownerDead(pid))).toEqual(held.pids);
    expect(mountsUnder(held.dir)).not.toEqual([]);

    const next = await createRig({ hosts: 1 });
    await next.teardown();
    await expect.poll(() => held.pids.filter((pid) => !ownerDead(pid)), { timeout: 10_000 }).toEqual([]);
    expect(mountsUnder(held.dir)).toEqual([]);
    expect(existsSync(held.dir)).toBe(false);
    expect(rigCgroupNames((n) => n === held.netns)).toEqual([]);
  });
});
