// inspect() end to end on fixture host trees, real tool scripts and real sockets.
import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineSpec } from "../../src/desired/types.js";
import { CancelledError, NodeUnreachable } from "../../src/errors.js";
import { SshHost } from "../../src/hosts/ssh.js";
import { inspect } from "../../src/phases/inspect.js";
import { inspectionFailure } from "./inspection-failure.js";
import { freePorts } from "../e2e/sim-fleet.js";
import { LocalHost } from "../../src/hosts/local.js";
import { LAUNCHER, onLoopback } from "./plan-fixtures.js";

const hosts = fileURLToPath(new URL("../fixtures/hosts/", import.meta.url));
const H100 = "NVIDIA H100 80GB HBM3";
const UUID1 = "GPU-9e8d7c6b-5a4f-4e2d-8c0b-a9f8e7d6c5b4";
const CONFIG = JSON.stringify({ architectures: ["LlamaForCausalLM"], model_type: "llama" });
const CONFIG_SHA = createHash("sha256").update(CONFIG).digest("hex");

let modelDir: string;
let ports: number[];

beforeAll(async () => {
  modelDir = await mkdtemp(path.join(tmpdir(), "narwhal-inspect-model-"));
  await writeFile(path.join(modelDir, "config.json"), CONFIG);
  ports = await freePorts(4);
});
afterAll(async () => {
  await rm(modelDir, { recursive: true, force: true });
});

type Overrides = {
  launch?: Partial<EngineSpec["launch"]>;
  node?: Partial<EngineSpec["node"]>;
  model?: Partial<EngineSpec["model"]>;
} & Partial<Omit<EngineSpec, "launch" | "node" | "model">>;

/** A minimal engine spec on the h100x2 fixture host (fields per src/desired/types.ts). */
function spec(o: Overrides = {}): EngineSpec {
  const [http = 0, attestation = 0, nixl = 0, transfer = 0] = ports;
  const { launch, node, model, ...rest } = o;
  return {
    name: "engine-1",
    index: 1,
    iid: "n1",
    role: "prefill",
    backend: "native",
    ...onLoopback(http, attestation, nixl),
    transfer_ports: [transfer],
    fabric_interface: "lo",
    python: "python3",
    ready_seconds: 180,
    launcher: LAUNCHER,
    input_hash: "0".repeat(64),
    ...rest,
    node: {
      name: "h100-node",
      sysfs_root: path.join(hosts, "h100x2", "sys"),
      nvidia_smi: path.join(hosts, "h100x2", "bin", "nvidia-smi"),
      rocminfo: "rocminfo",
      dev_root: path.join(hosts, "h100x2"),
      work_dir: "/var/lib/narwhal/runs",
      ...node,
    },
    launch: {
      role: "prefill",
      backend: "native",
      accelerator: H100,
      gpu_ids: ["0", "1"],
      tensor_parallel_size: 2,
      gpu_visibility_env: "CUDA_VISIBLE_DEVICES",
      accelerator_devices: ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"],
      network_mode: "host",
      transfer: { transport: "ucx_rdma", net_devices: ["mlx5_0:1"], devices: ["/dev/infiniband/uverbs0"] },
      runtime: {
        expected_packages: { vllm: "0.11.0" },
        model_dtype: "bfloat16",
        kv_cache_dtype: "auto",
        block_size: 16,
        environment: {},
        extra_args: [],
      },
      sources: {},
      ...launch,
    },
    model: { dir: modelDir, config_sha256: CONFIG_SHA, served_name: "m", ...model },
  };
}

const host = new LocalHost("h100-node", { PATH: "/usr/local/bin:/usr/bin:/bin" });
const opts = () => ({ signal: new AbortController().signal, imageId: "sha256:" + "a".repeat(64), host });

const failure = inspectionFailure;

describe("inspect on h100x2", () => {
  it("passes and records what it observed", async () => {
    const r = await inspect(spec(), opts());
    expect(r).toMatchObject({
      engine: "engine-1",
      node: "h100-node",
      vendors: ["nvidia"],
      accelerator: H100,
      physical_gpu_count: 2,
      selected: [
        { id: "0", index: 0 },
        { id: "1", index: 1, uuid: UUID1 },
      ],
      model_config_sha256: CONFIG_SHA,
      image_id: "sha256:" + "a".repeat(64),
    });
    expect(r.devices.every((d) => d.present)).toBe(true);
    expect(r.ports.map((p) => p.purpose)).toEqual(["http", "attestation", "nixl side channel", "transfer"]);
    expect(r.group_signature).toMatch(/^[0-9a-f]{16}$/);
    expect(r.tool_output).toContain(UUID1);
    expect(() => new Date(r.inspected_at).toISOString()).not.toThrow();
  });

  it("selects GPUs by UUID and UUID prefix", async () => {
    const r = await inspect(spec({ launch: { gpu_ids: [UUID1, "GPU-4f1a"], tensor_parallel_size: 2 } }), opts());
    expect(r.selected).toEqual([
      { id: UUID1, index: 1, uuid: UUID1 },
      { id: "GPU-4f1a", index: 0, uuid: "GPU-4f1a7c2e-8b3d-4e6f-9a0b-1c2d3e4f5a6b" },
    ]);
  });

  it("reports a wrong accelerator, naming launch.accelerator and hardware.accelerator", async () => {
    const err = await failure(inspect(spec({ launch: { accelerator: "NVIDIA H200" } }), opts()));
    expect(err.problems).toHaveLength(1);
    expect(err.message).toContain(`observed accelerator "${H100}"`);
    expect(err.input).toBe("launch.accelerator (fleet hardware.accelerator)");
    expect(err).toMatchObject({ engine: "engine-1", step: "inspect", retryable: false });
  });

  it("collects every problem into one error: invisible GPU, missing device, busy port, model sha", async () => {
    const busy = net.createServer();
    await new Promise<void>((r) => busy.listen(ports[2], "127.0.0.1", () => r()));
    try {
      const err = await failure(
        inspect(
          spec({
            launch: { gpu_ids: ["0", "5"], accelerator_devices: ["/dev/nvidia0", "/dev/nvidia5"] },
            model: { config_sha256: "f".repeat(64) },
          }),
          opts(),
        ),
      );
      expect(err.problems.map((p) => p.input)).toEqual([
        "launch.gpu_ids[1]",
        "launch.accelerator_devices[1]",
        "nixl_port (VLLM_NIXL_SIDE_CHANNEL_PORT)",
        "model.config_sha256 (NARWHAL_MODEL_CONFIG_SHA256) / model.dir (NARWHAL_MODEL_DIR)",
      ]);
      const text = err.describe();
      expect(text).toContain('gpu id "5" is not visible on h100-node');
      expect(text).toContain("Restore the declared device exposure before launch.");
      expect(text).toContain(`port ${ports[2]} (nixl side channel) already has a listener`);
      expect(text).toContain("blocks launch until ownership is resolved");
      expect(text).toContain("Rerun discovery after changing the provisioned checkpoint");
      // A busy port alone would be outwaited; hardware and identity mismatches are terminal.
      expect(err).toMatchObject({ retryable: false, failure: "terminal" });
      expect(err.problems.map((p) => p.failure)).toEqual(["terminal", "outwait", "outwait", "terminal"]);
      expect(err.toJSON()).toHaveProperty("problems");
    } finally {
      await new Promise((r) => busy.close(r));
    }
  });

  it("outwaits a missing device alone: the host's to restore, not a desired edit", async () => {
    const err = await failure(
      inspect(spec({ launch: { accelerator_devices: ["/dev/nvidia0", "/dev/nvidia5"] } }), opts()),
    );
    expect(err.problems).toHaveLength(1);
    expect(err).toMatchObject({ retryable: true, failure: "outwait", input: "launch.accelerator_devices[1]" });
  });

  it("outwaits a stranger's listener on a planned port alone, and ignorePorts skips the engine's own", async () => {
    const busy = net.createServer();
    await new Promise<void>((r) => busy.listen(ports[0], "127.0.0.1", () => r()));
    try {
      const err = await failure(inspect(spec(), opts()));
      expect(err.problems).toHaveLength(1);
      expect(err).toMatchObject({ retryable: true, failure: "outwait", input: "http_port (engine url)" });
      const r = await inspect(spec(), { ...opts(), ignorePorts: [ports[0] ?? 0] });
      expect(r.ports[0]).toMatchObject({ purpose: "http", free: true });
    } finally {
      await new Promise((r) => busy.close(r));
    }
  });

  it("stops with CancelledError when the signal is already aborted", async () => {
    const ac = new AbortController();
    ac.abort();
    await expect(inspect(spec(), { ...opts(), signal: ac.signal })).rejects.toBeInstanceOf(CancelledError);
  });
});

describe("inspect reads the model and the node's reachability through the host", () => {
  it("records the checkpoint's metadata and a GGUF file's digest; a missing GGUF names NARWHAL_MODEL_PATH", async () => {
    const gguf = path.join(modelDir, "model.Q8_0.gguf");
    await writeFile(gguf, "GGUF fixture bytes");
    const r = await inspect(spec({ model: { path: gguf } }), opts());
    expect(r.model_meta).toEqual({ auto_map: false, auto_map_sources: [], conv_ssm: false, model_type: "llama" });
    expect(r.model_file_sha256).toBe(createHash("sha256").update("GGUF fixture bytes").digest("hex"));
    expect(r.fabric).toMatchObject({ interface: "lo", present: true, carries_node_ip: true });

    const err = await failure(inspect(spec({ model: { path: path.join(modelDir, "absent.gguf") } }), opts()));
    expect(err.problems).toEqual([
      expect.objectContaining({
        message: `model file ${path.join(modelDir, "absent.gguf")} cannot be read on node h100-node (ENOENT)`,
        input: "NARWHAL_MODEL_PATH",
        failure: "terminal",
      }),
    ]);
  });

  it("rejects with the node's own NodeUnreachable, not a list of host problems, when the node cannot be reached", async () => {
    const stateDir = await mkdtemp(path.join(tmpdir(), "narwhal-inspect-ssh-"));
    const [closed = 0] = await freePorts(1);
    const unreachable = new SshHost({
      node: "h100-node",
      destination: "root@127.0.0.1",
      port: closed,
      stateDir,
      connectTimeoutS: 5,
      clientEnv: { PATH: "/usr/local/bin:/usr/bin:/bin" },
    });
    try {
      await expect(inspect(spec(), { ...opts(), host: unreachable })).rejects.toBeInstanceOf(NodeUnreachable);
    } finally {
      await unreachable.close();
      await rm(stateDir, { recursive: true, force: true });
    }
  });
});

describe("inspect on other hosts", () => {
  it("passes on mi300x through rocminfo", async () => {
    const mi = path.join(hosts, "mi300x");
    const r = await inspect(
      spec({
        node: {
          name: "mi300x-node",
          sysfs_root: path.join(mi, "sys"),
          rocminfo: path.join(mi, "bin", "rocminfo"),
          nvidia_smi: "nvidia-smi",
          dev_root: mi,
        },
        launch: {
          accelerator: "AMD Instinct MI300X",
          gpu_visibility_env: "ROCR_VISIBLE_DEVICES",
          gpu_ids: ["GPU-c14abb436c69353f"],
          tensor_parallel_size: 1,
          accelerator_devices: ["/dev/kfd", "/dev/dri/renderD129"],
          transfer: { transport: "ucx_tcp", net_devices: ["eth0"], devices: [] },
        },
      }),
      opts(),
    );
    expect(r).toMatchObject({
      vendors: ["amd"],
      accelerator: "AMD Instinct MI300X",
      physical_gpu_count: 2,
      selected: [{ index: 1 }],
    });
    expect(r.tool_output).toContain("Marketing Name:");
  });

  it("reports the seed's PCI wording on nogpu, together with the other problems", async () => {
    const err = await failure(
      inspect(
        spec({ node: { sysfs_root: path.join(hosts, "nogpu", "sys"), dev_root: path.join(hosts, "nogpu") } }),
        opts(),
      ),
    );
    expect(err.message).toContain("Inspect GPU PCI device exposure on this engine host.");
    // 4 accelerator + 1 transfer device + the RDMA HCA mlx5_0:1, which nogpu's sysfs lacks too.
    expect(err.problems.filter((p) => p.input.startsWith("launch.")).length).toBe(6);
  });

  it("reports a CUDA launch record on an AMD-only host", async () => {
    const mi = path.join(hosts, "mi300x");
    const err = await failure(
      inspect(spec({ node: { sysfs_root: path.join(mi, "sys"), dev_root: path.join(hosts, "h100x2") } }), opts()),
    );
    expect(err.problems.map((p) => p.input)).toEqual(["launch.gpu_visibility_env"]);
  });
});
