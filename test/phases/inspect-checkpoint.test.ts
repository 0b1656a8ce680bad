// The whole checkpoint through inspect and prepare (seed 000: "The private
// discovery record binds the checkpoint to its complete manifest and matched
// tree digest. Rerun discovery after changing the provisioned checkpoint."):
// a real model directory, the h100x2 host fixture, real ports.
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/desired/hash.js";
import type { EngineSpec } from "../../src/desired/types.js";
import { LocalHost } from "../../src/hosts/local.js";
import type { CheckpointObservation } from "../../src/phases/checkpoint-agreement.js";
import { MODEL_MANIFEST_FILE } from "../../src/phases/host/model-manifest.js";
import { inspect } from "../../src/phases/inspect.js";
import { LAUNCH_FILE, prepare, readPlan } from "../../src/phases/prepare.js";
import type { Inspection } from "../../src/phases/types.js";
import { freePorts } from "../e2e/sim-fleet.js";
import { APP, engineSpec, onLoopback } from "./plan-fixtures.js";
import { inspectionFailure } from "./inspection-failure.js";

const FIXTURE = fileURLToPath(new URL("../fixtures/hosts/h100x2", import.meta.url));
const CONFIG = JSON.stringify({ architectures: ["LlamaForCausalLM"], model_type: "llama" });
const ENV = { PATH: "/usr/local/bin:/usr/bin:/bin" };

let root: string;
let modelDir: string;

/** engine-<n> on `node` (a local node of that name), listening on free loopback ports. */
async function specOn(n: number, node: string, model: Partial<EngineSpec["model"]> = {}): Promise<EngineSpec> {
  const [http = 0, attestation = 0, nixl = 0] = await freePorts(3);
  const base = engineSpec();
  return {
    ...base,
    name: `engine-${n}`,
    index: n,
    iid: `n${n}`,
    ...onLoopback(http, attestation, nixl),
    fabric_interface: "lo",
    launch: { ...base.launch, transfer: { transport: "ucx_tcp", net_devices: ["lo"], devices: [] } },
    node: {
      ...base.node,
      name: node,
      sysfs_root: path.join(FIXTURE, "sys"),
      nvidia_smi: path.join(FIXTURE, "bin", "nvidia-smi"),
      dev_root: FIXTURE,
    },
    model: { ...base.model, dir: modelDir, config_sha256: sha256Hex(CONFIG), ...model },
  };
}

function inspectOn(spec: EngineSpec, peers: CheckpointObservation[] = []): Promise<Inspection> {
  return inspect(spec, {
    signal: new AbortController().signal,
    imageId: "sha256:" + "a".repeat(64),
    host: new LocalHost(spec.node.name, ENV),
    manifestCacheDir: path.join(root, "cache", spec.node.name),
    checkpointPeers: () => peers,
  });
}

const observed = (i: Inspection): CheckpointObservation => ({
  engine: i.engine,
  node: i.node,
  model_dir: i.model_manifest.model_dir,
  config_sha256: i.model_config_sha256,
  tree_sha256: i.model_tree_sha256,
});

beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "narwhal-inspect-ckpt-"));
  modelDir = path.join(root, "model");
  await fs.mkdir(modelDir);
  await fs.writeFile(path.join(modelDir, "config.json"), CONFIG);
  await fs.writeFile(path.join(modelDir, "model.safetensors"), "weights v1");
  await fs.writeFile(path.join(modelDir, "tokenizer.json"), '{"v":1}');
});
afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

describe("inspect binds the whole checkpoint", () => {
  it("records the manifest and tree digest, and prepare writes model-manifest.json and the digest into launch.json", async () => {
    const spec = await specOn(1, "node-a");
    const i = await inspectOn(spec);
    expect(i.model_manifest.files.map((f) => f.path)).toEqual(["config.json", "model.safetensors", "tokenizer.json"]);
    expect(i.model_tree_sha256).toBe(i.model_manifest.tree_sha256);
    expect(i.model_manifest).toMatchObject({ model_dir: modelDir, node: "node-a" });

    const run = await prepare(spec, i, { stateDir: path.join(root, "state"), app: APP });
    const manifest = JSON.parse(await fs.readFile(path.join(run.dir, MODEL_MANIFEST_FILE), "utf8")) as unknown;
    expect(manifest).toEqual(i.model_manifest);
    expect((await fs.stat(path.join(run.dir, MODEL_MANIFEST_FILE))).mode & 0o777).toBe(0o600);
    const { plan, sha256 } = await readPlan(run.dir);
    expect(plan.inspection.model_tree_sha256).toBe(i.model_tree_sha256);
    expect(sha256).toBe(sha256Hex(await fs.readFile(path.join(run.dir, LAUNCH_FILE))));
  });

  it("passes with NARWHAL_MODEL_TREE_SHA256 pinned to the tree, and fails terminally once a weight file changes", async () => {
    const tree = (await inspectOn(await specOn(1, "node-a"))).model_tree_sha256;
    const pinned = await specOn(1, "node-a", { tree_sha256: tree });
    expect((await inspectOn(pinned)).model_tree_sha256).toBe(tree);

    await fs.writeFile(path.join(modelDir, "model.safetensors"), "weights v2");
    const err = await inspectionFailure(inspectOn(pinned));
    expect(err.problems).toHaveLength(1);
    const now = sha256Hex(
      JSON.stringify([
        { path: "config.json", sha256: sha256Hex(CONFIG), size: CONFIG.length },
        { path: "model.safetensors", sha256: sha256Hex("weights v2"), size: 10 },
        { path: "tokenizer.json", sha256: sha256Hex('{"v":1}'), size: 7 },
      ]),
    );
    expect(err.problems[0]).toEqual({
      message: `tree digest of ${modelDir} on node node-a is ${now} (3 files), but model.tree_sha256 expects ${tree}`,
      input: "model.tree_sha256 (NARWHAL_MODEL_TREE_SHA256) / model.dir (NARWHAL_MODEL_DIR)",
      fix: "Rerun discovery after changing the provisioned checkpoint, or restore the checkpoint discovery recorded.",
      failure: "terminal",
    });
    expect(err).toMatchObject({ engine: "engine-1", step: "inspect", retryable: false });
  });
});

describe("the checkpoint across nodes", () => {
  it("fails the engine whose node holds another tree than the engine inspected before it, naming both nodes and digests", async () => {
    const first = await inspectOn(await specOn(1, "node-a"));
    await fs.writeFile(path.join(modelDir, "tokenizer.json"), '{"v":2}');
    const second = await specOn(2, "node-b");
    const err = await inspectionFailure(inspectOn(second, [observed(first)]));
    const now = (await inspectOn(second)).model_tree_sha256;
    expect(now).not.toBe(first.model_tree_sha256);
    expect(err.problems).toHaveLength(1);
    expect(err.problems[0]!.message).toBe(
      `checkpoint ${modelDir} has tree digest ${now} on node node-b (engine-2), but ${first.model_tree_sha256} on node node-a (engine-1): engines of one checkpoint must load the same files`,
    );
    expect(err.problems[0]).toMatchObject({
      input: "model.dir (NARWHAL_MODEL_DIR) on nodes node-b and node-a",
      failure: "outwait",
    });
    expect(err.problems[0]!.fix).toContain("set NARWHAL_MODEL_TREE_SHA256 to the right tree digest");

    // Restored on node-b: the same tree again, the engine passes.
    await fs.writeFile(path.join(modelDir, "tokenizer.json"), '{"v":1}');
    expect((await inspectOn(second, [observed(first)])).model_tree_sha256).toBe(first.model_tree_sha256);
  });

  it("compares only other nodes and the same checkpoint; a pin decides alone", async () => {
    const first = await inspectOn(await specOn(1, "node-a"));
    await fs.writeFile(path.join(modelDir, "tokenizer.json"), '{"v":2}');
    const peer = observed(first);
    // Another engine of the same node, or one of another checkpoint (config.json or model.dir): nothing to compare.
    await inspectOn(await specOn(2, "node-a"), [peer]);
    await inspectOn(await specOn(2, "node-b"), [{ ...peer, config_sha256: "0".repeat(64) }]);
    await inspectOn(await specOn(2, "node-b"), [{ ...peer, model_dir: "/elsewhere" }]);
    // Pinned to the tree node-b holds: the pin says which is right, node-a's older view does not count.
    const tree = (await inspectOn(await specOn(2, "node-b"))).model_tree_sha256;
    await inspectOn(await specOn(2, "node-b", { tree_sha256: tree }), [peer]);
  });
});
