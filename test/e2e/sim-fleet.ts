// Builds a desired/ tree for a simulated native fleet as data: every path is
// absolute (the tree lives in a temp dir), every port is chosen free, and one
// switch per knob a test turns (faults, extra_args, TP).
import fs from "node:fs/promises";
import fsSync from "node:fs";
import os from "node:os";
import path from "node:path";
import net from "node:net";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const HOST_FIXTURE = path.join(REPO, "test/fixtures/hosts/h100x2");
export const SIM_SITE = path.join(REPO, "test/sim/site");

// Test ports come from below the kernel's ephemeral range (32768-60999 here), one slice per vitest
// project (NARWHAL_TEST_PORT_SLICE, set in vitest.config.ts): a port the kernel picked for bind(0)
// was free only until the next bind(0) anywhere on the host, and the lanes run side by side (the e2e
// lane once found its NIXL port taken while it prepared 15 plans, by whatever the docker lane bound).
// Below the range nothing but an explicit choice binds, and the slices keep the lanes' choices apart.
const PORT_FLOOR = 20_000;
const SLICE_SIZE = 2_500;
const SLICES = 5;

/** Where the next choice starts in this process's slice: a random start, then onward, so two calls of one file never hand out the same port before the first one's engine binds it. */
class PortCursor {
  private offset = Math.floor(Math.random() * SLICE_SIZE);
  constructor(private readonly base: number) {}
  next(): number {
    this.offset = (this.offset + 1) % SLICE_SIZE;
    return this.base + this.offset;
  }
}

function sliceBase(): number {
  const raw = process.env["NARWHAL_TEST_PORT_SLICE"] ?? "0";
  const slice = Number(raw);
  if (!Number.isInteger(slice) || slice < 0 || slice >= SLICES)
    throw new Error(`NARWHAL_TEST_PORT_SLICE=${raw}: want an integer 0-${SLICES - 1}`);
  return PORT_FLOOR + slice * SLICE_SIZE;
}

const cursor = new PortCursor(sliceBase());

function listenOn(port: number): Promise<net.Server | null> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", () => resolve(null));
    srv.listen(port, "127.0.0.1", () => resolve(srv));
  });
}

/**
 * TCP ports nothing listens on right now, all different, from this project's slice: every one is
 * held open until all are chosen, and the cursor moves on, so no two calls in one process return
 * the same port.
 */
export async function freePorts(n: number): Promise<number[]> {
  const held: net.Server[] = [];
  try {
    for (let tries = 0; held.length < n; tries++) {
      if (tries >= SLICE_SIZE) throw new Error(`no ${n} free ports in the slice at ${sliceBase()}`);
      const srv = await listenOn(cursor.next());
      if (srv) held.push(srv);
    }
    return held.map((s) => (s.address() as net.AddressInfo).port);
  } finally {
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
  }
}

/** A TCP port nothing listens on right now, from this project's slice. */
export async function freePort(): Promise<number> {
  return (await freePorts(1))[0]!;
}

export interface SimEngineOptions {
  faults?: string;
  /** GPU indices (default: the engine's own index); TP follows their count. */
  gpus?: string[];
  expectedPackages?: Record<string, string>;
  extraArgs?: string[];
  environment?: Record<string, string>;
  /** "prefill" or "decode" (default: prefill for the first engine, decode for the rest). */
  role?: string;
}

export interface SimFleetOptions {
  engines?: SimEngineOptions[];
  apiKey?: string;
  readySeconds?: number;
  /** A model fixture under test/sim/models (default tiny-llama). */
  model?: string;
  /** A model directory elsewhere (e.g. a copy with another config.json), in place of the fixture. */
  modelDir?: string;
  /** NARWHAL_MODEL_REVISION (default sim-0001). */
  modelRevision?: string;
  /** Run the engines as containers of this image (default: native processes). */
  container?: { image: string };
  /** The node's dev_root, where declared devices are looked for (default the h100x2 fixture). */
  devRoot?: string;
  /** NARWHAL_NATIVE_PYTHON (default /usr/bin/python3). */
  python?: string;
  /** fleet.json's kv_transfer block (absent: the defaults). */
  kvTransfer?: Record<string, unknown>;
}

export interface SimFleet {
  dir: string;
  stateDir: string;
  ports: number[][];
  write(opts: SimFleetOptions): Promise<void>;
}

export async function simFleet(opts: SimFleetOptions = {}): Promise<SimFleet> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-e2e-"));
  const dir = path.join(root, "desired");
  const stateDir = path.join(root, "state");
  await fs.mkdir(dir);
  const ports: number[][] = [];
  // Ports for at least two engines (a later write may add the second), more when the fleet is bigger.
  const count = Math.max(2, opts.engines?.length ?? 2);
  const chosen = await freePorts(3 * count);
  for (let i = 0; i < count; i++) ports.push(chosen.slice(3 * i, 3 * i + 3));
  // A later write keeps the fleet's kv_transfer block unless it names one.
  const fleet: SimFleet = {
    dir,
    stateDir,
    ports,
    write: (o) => writeTree(dir, ports, { kvTransfer: opts.kvTransfer, ...o }),
  };
  await fleet.write(opts);
  return fleet;
}

/** sha256 of a model directory's config.json, as NARWHAL_MODEL_CONFIG_SHA256 pins it. */
export function modelSha(dir: string): string {
  return createHash("sha256")
    .update(fsSync.readFileSync(path.join(dir, "config.json")))
    .digest("hex");
}

export function launchRecord(role: string, gpu: string, e: SimEngineOptions = {}, container?: { image: string }) {
  const gpus = e.gpus ?? [gpu];
  return {
    role,
    ...(container ? { backend: "container", image: container.image } : { backend: "native" }),
    accelerator: "NVIDIA H100 80GB HBM3",
    gpu_ids: gpus,
    tensor_parallel_size: gpus.length,
    gpu_visibility_env: "CUDA_VISIBLE_DEVICES",
    // A container maps its devices for real; this machine has no /dev/nvidia*, so container fleets declare none.
    accelerator_devices: container ? [] : [...gpus.map((g) => `/dev/nvidia${g}`), "/dev/nvidiactl"],
    network_mode: "host",
    transfer: { transport: "ucx_tcp", net_devices: ["${NARWHAL_FABRIC_INTERFACE}"], devices: [] },
    sources: {},
    runtime: {
      expected_packages: e.expectedPackages ?? { vllm: "0.11.0", nixl: "0.6.1" },
      model_dtype: "bfloat16",
      kv_cache_dtype: "auto",
      block_size: 16,
      environment: {
        ...(container ? {} : { PYTHONPATH: SIM_SITE }),
        ...(e.faults ? { NARWHAL_SIM_FAULTS: e.faults } : {}),
        ...(e.environment ?? {}),
      },
      extra_args: e.extraArgs ?? [],
    },
  };
}

async function writeTree(dir: string, ports: number[][], o: SimFleetOptions): Promise<void> {
  const engines = o.engines ?? [{}, {}];
  const modelDir = o.modelDir ?? path.join(REPO, "test/sim/models", o.model ?? "tiny-llama");
  const env = [
    "NARWHAL_FABRIC_INTERFACE=lo",
    ...ports.flatMap(([http, attest, nixl], i) => [
      `NARWHAL_NODE_${i + 1}_IP=127.0.0.1`,
      `NARWHAL_NODE_${i + 1}_ENGINE_PORT=${http}`,
      `NARWHAL_NODE_${i + 1}_ATTEST_PORT=${attest}`,
      `NARWHAL_NODE_${i + 1}_NIXL_PORT=${nixl}`,
    ]),
    `NARWHAL_ENGINE_PORT=${ports[0]![0]}`,
    `NARWHAL_ATTEST_PORT=${ports[0]![1]}`,
    `NARWHAL_MODEL_DIR=${modelDir}`,
    `NARWHAL_MODEL_CONFIG_SHA256=${modelSha(modelDir)}`,
    `NARWHAL_ENGINE_MODEL_NAME=${o.model ?? "tiny-llama"}`,
    `NARWHAL_MODEL_REVISION=${o.modelRevision ?? "sim-0001"}`,
    `NARWHAL_NATIVE_PYTHON=${o.python ?? "/usr/bin/python3"}`,
    `NARWHAL_ENGINE_API_KEY=${o.apiKey ?? "e2e-key-0123456789"}`,
    `NARWHAL_READY_SECONDS=${o.readySeconds ?? 60}`,
  ];
  const role = (e: SimEngineOptions, i: number) => e.role ?? (i === 0 ? "prefill" : "decode");
  // The host fixture has two GPUs: every two engines get a node of their own (local, local-2, ...).
  const nodeCount = Math.ceil(engines.length / 2);
  const fleet = {
    engines: engines.map((e, i) => ({
      iid: `n${i + 1}`,
      url: `\${NARWHAL_NODE_${i + 1}_URL}`,
      attestation_url: `\${NARWHAL_NODE_${i + 1}_ATTESTATION_URL}`,
      role: role(e, i),
    })),
    nodes: Array.from({ length: nodeCount }, (_, k) => ({
      name: k === 0 ? "local" : `local-${k + 1}`,
      engines: engines.slice(2 * k, 2 * k + 2).map((_, j) => `n${2 * k + j + 1}`),
      sysfs_root: path.join(HOST_FIXTURE, "sys"),
      nvidia_smi: path.join(HOST_FIXTURE, "bin/nvidia-smi"),
      dev_root: o.devRoot ?? HOST_FIXTURE,
    })),
    hardware: {
      accelerator: "NVIDIA H100 80GB HBM3",
      accelerators_per_engine: engines[0]!.gpus?.length ?? 1,
      tensor_parallel: engines[0]!.gpus?.length ?? 1,
      // Engines of several GPU counts (mixed TP): each role's own shape, from its first engine.
      ...(new Set(engines.map((e) => e.gpus?.length ?? 1)).size > 1
        ? {
            roles: Object.fromEntries(
              engines.map((e, i) => {
                const n = e.gpus?.length ?? 1;
                return [role(e, i), { accelerators_per_engine: n, tensor_parallel: n }];
              }),
            ),
          }
        : {}),
    },
    ...(o.kvTransfer ? { kv_transfer: o.kvTransfer } : {}),
  };
  const launch = {
    engines: Object.fromEntries(
      engines.map((e, i) => [`engine-${i + 1}`, launchRecord(role(e, i), String(i % 2), e, o.container)]),
    ),
  };
  await writeDesiredFiles(dir, env, fleet, launch);
}

/** The three desired/ files, each replaced atomically, as an editor's save would. */
export async function writeDesiredFiles(dir: string, env: string[], fleet: object, launch: object): Promise<void> {
  const put = async (name: string, text: string) => {
    const tmp = path.join(dir, `.${name}.tmp`);
    await fs.writeFile(tmp, text);
    await fs.rename(tmp, path.join(dir, name));
  };
  await put("deployment.env", env.join("\n") + "\n");
  await put("fleet.json", JSON.stringify(fleet, null, 2));
  await put("engine-launch.json", JSON.stringify(launch, null, 2));
}
