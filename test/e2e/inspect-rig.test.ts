// Inspection of a remote node reads that node (issue 10): two rig hosts, each a
// network namespace with its own sshd, reached only over SSH. A fixture sysfs,
// device tree and nvidia-smi placed only in host A's private /root are what an
// engine on A sees, and what an engine on B is told it lacks; a listener inside
// A's namespace blocks A's engine and not B's on the same port; the fabric
// interface is A's eth0 carrying A's address. One checkpoint path holding other
// files on each host gives each its own tree digest, computed and cached there.
import type { ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/desired/hash.js";
import type { EngineSpec } from "../../src/desired/types.js";
import { SshHost } from "../../src/hosts/ssh.js";
import { inspect } from "../../src/phases/inspect.js";
import { modelManifest } from "../../src/phases/host/model-manifest.js";
import { inspectionFailure } from "../phases/inspection-failure.js";
import { blockedListeners, checkListeners } from "../../src/phases/listeners.js";
import { buildLaunchPlan, renderEnvFile } from "../../src/phases/plan.js";
import { ENGINE_ENV_FILE } from "../../src/phases/run-env.js";
import { engineSpec, H100, planInputs } from "../phases/plan-fixtures.js";
import { createRig, type Rig, type RigHost } from "../rig/rig.js";
import { rigSshHost } from "../rig/ssh-host.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/hosts/h100x2/", import.meta.url));
const CONFIG = JSON.stringify({ architectures: ["LlamaForCausalLM"], model_type: "llama" });

let rig: Rig;
let a: RigHost;
let b: RigHost;
let stateDir = "";
let modelDir = "";
const access = new Map<string, SshHost>();

/** Where the node's GPU tree lives: "home" = /root, which only host A's sessions hold; "shared" = the repository's fixture. */
type Paths = "home" | "shared";

/** An engine on `h`, its URL and NIXL host the node's own address, fabric interface eth0. */
function specOn(h: RigHost, paths: Paths, over: Partial<EngineSpec> = {}): EngineSpec {
  const base = engineSpec();
  const root = paths === "home" ? "/root" : FIXTURE.replace(/\/$/, "");
  return {
    ...base,
    url: `http://${h.address}:${base.http_port}`,
    attestation_url: `http://${h.address}:${base.attestation_port}`,
    host: h.address,
    nixl_host: h.address,
    fabric_interface: "eth0",
    node: {
      ...base.node,
      name: h.name,
      sysfs_root: `${root}/sys`,
      nvidia_smi: `${root}/bin/nvidia-smi`,
      dev_root: root,
    },
    model: { ...base.model, dir: modelDir, config_sha256: sha256Hex(CONFIG) },
    ...over,
  };
}

const opts = (h: RigHost) => ({
  signal: new AbortController().signal,
  imageId: "sha256:" + "a".repeat(64),
  host: access.get(h.name)!,
});

/** python3's http.server inside the host's namespace on address:port; resolves once it serves (its own words). */
function serveIn(h: RigHost, port: number): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = h.spawnIn(["python3", "-u", "-m", "http.server", "--bind", h.address, String(port)]);
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`http.server on ${h.name} exited ${code}`)));
    child.stdout!.on("data", (d: Buffer) => {
      if (d.toString().includes("Serving HTTP")) resolve(child);
    });
  });
}

beforeAll(async () => {
  rig = await createRig({ hosts: 2 });
  [a, b] = rig.hosts as [RigHost, RigHost];
  stateDir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-ir-"));
  // The model directory is on the shared filesystem: both hosts hold the same checkpoint.
  modelDir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-ir-model-"));
  await fs.writeFile(path.join(modelDir, "config.json"), CONFIG);
  // The GPU host tree only on A: its /root (a.home) is no other host's, nor the controller's.
  for (const part of ["sys", "bin", "dev", "tool-output"])
    await fs.cp(path.join(FIXTURE, part), path.join(a.home, part), { recursive: true, verbatimSymlinks: true });
  for (const h of rig.hosts) access.set(h.name, rigSshHost(h, stateDir));
});
afterAll(async () => {
  for (const h of access.values()) await h.close();
  await rig?.teardown();
  for (const d of [stateDir, modelDir]) if (d) await fs.rm(d, { recursive: true, force: true });
});

describe("inspect over ssh on the engine's own node", () => {
  it("sees host A's GPU inventory, devices and fabric from A's private /root", async () => {
    const r = await inspect(specOn(a, "home"), opts(a));
    expect(r).toMatchObject({
      node: a.name,
      vendors: ["nvidia"],
      accelerator: H100,
      physical_gpu_count: 2,
      selected: [
        { id: "0", index: 0 },
        { id: "1", index: 1 },
      ],
      model_config_sha256: sha256Hex(CONFIG),
    });
    expect(r.devices).toEqual([
      { path: "/dev/nvidia0", present: true },
      { path: "/dev/nvidia1", present: true },
    ]);
    expect(r.ports.every((p) => p.free)).toBe(true);
    expect(r.fabric).toMatchObject({ interface: "eth0", present: true, carries_node_ip: true });
    expect(r.fabric!.addresses).toContain(a.address);
    // The controller's own machine has no such tree: what A's engine saw was read on A.
    await expect(fs.stat("/root/sys/bus/pci/devices")).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("tells the engine on host B that B lacks the tree and the tool, naming node B and its paths", async () => {
    const noTree = await inspectionFailure(inspect(specOn(b, "home"), opts(b)));
    expect(noTree.problems[0]).toMatchObject({ input: "node.sysfs_root", failure: "terminal" });
    expect(noTree.problems[0]!.message).toContain(
      `/root/sys/bus/pci/devices cannot be read on node ${b.name} (ENOENT)`,
    );
    expect(noTree.problems.filter((p) => p.input.startsWith("launch.accelerator_devices"))).toHaveLength(2);
    expect(noTree.problems.find((p) => p.input === "launch.accelerator_devices[0]")!.message).toContain(
      `device /dev/nvidia0 is missing on node ${b.name} (looked for /root/dev/nvidia0`,
    );

    // The PCI tree is shared (the repository's fixture), the tool only in A's /root.
    const noTool = await inspectionFailure(
      inspect(
        specOn(b, "shared", { node: { ...specOn(b, "shared").node, nvidia_smi: "/root/bin/nvidia-smi" } }),
        opts(b),
      ),
    );
    expect(noTool.problems).toEqual([
      expect.objectContaining({
        message: `/root/bin/nvidia-smi cannot be executed on node ${b.name} (ENOENT)`,
        input: "node.nvidia_smi",
        failure: "terminal",
      }),
    ]);
  });

  it("a listener inside A's namespace blocks A's engine (inspection and start's last look) and not B's on the same port", async () => {
    const port = engineSpec().http_port;
    const server = await serveIn(a, port);
    try {
      const onA = await inspectionFailure(inspect(specOn(a, "home"), opts(a)));
      expect(onA.problems).toEqual([
        expect.objectContaining({
          message: expect.stringContaining(`port ${port} (http) already has a listener`),
          input: "http_port (engine url)",
          failure: "outwait",
        }),
      ]);
      const onB = await inspect(specOn(b, "shared"), opts(b));
      expect(onB.ports[0]).toMatchObject({ port, purpose: "http", free: true });

      // Start's last look (seed 001 "Native port checks": the prepared plan's listeners) reads the node too.
      const lastLook = async (h: RigHost) => {
        const { plan, env } = buildLaunchPlan(planInputs({ spec: specOn(h, "shared") }));
        const runDir = await fs.mkdtemp(path.join(stateDir, "run-"));
        await fs.writeFile(path.join(runDir, ENGINE_ENV_FILE), renderEnvFile(env), { mode: 0o600 });
        return blockedListeners(await checkListeners(access.get(h.name)!, runDir, plan, {}));
      };
      expect(await lastLook(a)).toEqual([
        `http port ${port} on ${a.address} (launch.json endpoint) already has a listener`,
      ]);
      expect(await lastLook(b)).toEqual([]);
    } finally {
      server.kill("SIGKILL");
    }
  });

  it("refuses, on B, a planned address only A carries: the bind test and the fabric check run on B", async () => {
    const wrong = specOn(b, "shared", { host: a.address, nixl_host: a.address });
    const err = await inspectionFailure(inspect(wrong, opts(b)));
    const messages = err.problems.map((p) => p.message);
    expect(messages).toContain(`cannot bind ${a.address}:${wrong.http_port} (EADDRNOTAVAIL) on node ${b.name}`);
    expect(messages).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `fabric interface eth0 on node ${b.name} does not carry ${a.address.replace(/\./g, "\\.")} \\(it has ${b.address.replace(/\./g, "\\.")}`,
        ),
      ),
    );
    expect(err).toMatchObject({ failure: "terminal" });
  });

  it("outwaits a fabric interface the node does not have", async () => {
    const err = await inspectionFailure(inspect(specOn(a, "home", { fabric_interface: "ib0" }), opts(a)));
    expect(err.problems).toEqual([
      expect.objectContaining({
        message: `fabric interface ib0 does not exist on node ${a.name}`,
        input: "fabric_interface (NARWHAL_FABRIC_INTERFACE)",
        failure: "outwait",
      }),
    ]);
  });
});

describe("the whole checkpoint on each host", () => {
  it("hashes /root/model on each node itself (cached there) and fails B's engine when B holds another tree than A", async () => {
    // One checkpoint path, two copies: each host's private /root holds its own, B's tokenizer differs.
    for (const [h, tokenizer] of [
      [a, '{"v":1}'],
      [b, '{"v":2}'],
    ] as const) {
      await fs.mkdir(path.join(h.home, "model"), { recursive: true });
      await fs.writeFile(path.join(h.home, "model", "config.json"), CONFIG);
      await fs.writeFile(path.join(h.home, "model", "model.safetensors"), "weights");
      await fs.writeFile(path.join(h.home, "model", "tokenizer.json"), tokenizer);
    }
    const onNode = (h: RigHost, n: number): EngineSpec => {
      const s = specOn(h, "shared");
      return { ...s, name: `engine-${n}`, model: { ...s.model, dir: "/root/model" } };
    };
    const cacheDir = "/root/narwhal-cache";
    const first = await inspect(onNode(a, 1), { ...opts(a), manifestCacheDir: cacheDir });
    expect(first.model_manifest).toMatchObject({ model_dir: "/root/model", node: a.name });
    // The cache is A's own (its /root), and A does not hash the unchanged files again.
    const warm = await modelManifest(access.get(a.name)!, "/root/model", {
      signal: new AbortController().signal,
      cacheDir,
    });
    expect(warm).toMatchObject({ hashed: 0, cached: 3 });
    expect(warm.manifest.tree_sha256).toBe(first.model_tree_sha256);
    await expect(fs.stat(path.join(b.home, "narwhal-cache"))).rejects.toMatchObject({ code: "ENOENT" });

    const peer = {
      engine: first.engine,
      node: first.node,
      model_dir: first.model_manifest.model_dir,
      config_sha256: first.model_config_sha256,
      tree_sha256: first.model_tree_sha256,
    };
    const err = await inspectionFailure(
      inspect(onNode(b, 2), { ...opts(b), manifestCacheDir: cacheDir, checkpointPeers: () => [peer] }),
    );
    const bTree = (await inspect(onNode(b, 2), opts(b))).model_tree_sha256;
    expect(bTree).not.toBe(first.model_tree_sha256);
    expect(err.problems).toEqual([
      expect.objectContaining({
        message: `checkpoint /root/model has tree digest ${bTree} on node ${b.name} (engine-2), but ${first.model_tree_sha256} on node ${a.name} (engine-1): engines of one checkpoint must load the same files`,
        input: `model.dir (NARWHAL_MODEL_DIR) on nodes ${b.name} and ${a.name}`,
        failure: "outwait",
      }),
    ]);
  });
});
