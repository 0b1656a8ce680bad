// zod schemas for the two JSON files of desired/. They run on the documents
// *after* ${VAR} substitution (see load.ts for why), so every value here is the
// value an engine will actually get. Cross-record checks (TP = len(gpu_ids),
// disjoint GPUs, unique ports, ...) live in rules.ts, not here: a schema sees
// one value at a time and would stop the operator at the first problem.

import * as z from "zod";
import { SharedDeviceSchema } from "./launch-extras.js";
import { KvTransferSchema } from "./kv-policy.js";

/**
 * Fleet iid "n<k>", the k shared with engine-<k> and NARWHAL_NODE_<k>_* variables.
 * k has at most four digits: it is parsed as a number, and "n99999999999999999999"
 * would round onto another engine's index.
 */
export const IID_PATTERN = /^n([1-9][0-9]{0,3})$/;
/** Launch record key "engine-<k>" (same k as the iid). */
export const ENGINE_NAME_PATTERN = /^engine-([1-9][0-9]{0,3})$/;

const nonEmpty = z.string().min(1, "must not be empty");
const role = z
  .string()
  .regex(/^[a-z][a-z0-9_-]*$/, "must be a lower-case word such as prefill or decode")
  .describe("Serving role, e.g. prefill or decode; the fleet and launch records must agree");
const absolutePath = z
  .string()
  .regex(/^\//, "must be an absolute host path such as /dev/kfd")
  .regex(/^[^\x00-\x1f\x7f]*$/, "must not contain control characters");
/** A value the launcher writes into container.env, one KEY=VALUE per line. */
const envValue = z
  .string()
  .regex(/^[^\r\n\x00]*$/, "must be a single line: container.env holds one KEY=VALUE per line");
const positiveInt = z.number().int().positive();
/** An editor's pointer to the file's JSON Schema (`narwhal schema`); narwhal reads nothing from it. */
const schemaRef = z
  .string()
  .optional()
  .describe(
    "JSON Schema of this file, for editors, e.g. ../schemas/fleet.schema.json (narwhal schema); ignored by narwhal",
  );

export const FleetEngineSchema = z
  .object({
    iid: z
      .string()
      .regex(IID_PATTERN, 'must be "n<k>" with 1 ≤ k ≤ 9999, matching launch record engine-<k>')
      .describe("Instance id n<k>; pairs with launch record engine-<k> and NARWHAL_NODE_<k>_* variables"),
    url: nonEmpty.describe('Engine HTTP URL, usually "${NARWHAL_NODE_<k>_URL}" (seed 003 §14)'),
    attestation_url: nonEmpty.describe('Attestation sidecar URL, usually "${NARWHAL_NODE_<k>_ATTESTATION_URL}"'),
    role,
  })
  .strict()
  .describe("One engine of the fleet, exactly {iid, url, attestation_url, role}");

/**
 * How the controller reaches a node over OpenSSH. In the input hash: destination
 * and port (which host an engine runs on); not: the two files (how the
 * controller logs in changes nothing the engine is started with).
 */
export const NodeSshSchema = z
  .object({
    destination: nonEmpty.describe(
      "[user@]host given to ssh; with port, it says which host the node is (hashed: moving an engine to another host replaces it); nodes with the same host and port are one host",
    ),
    port: z
      .number()
      .int("must be a whole TCP port number")
      .min(1, "must be a TCP port from 1 to 65535")
      .max(65535, "must be a TCP port from 1 to 65535")
      .default(22)
      .describe("sshd port on the node; default 22 (hashed with destination)"),
    identity_file: nonEmpty
      .optional()
      .describe(
        "Private key for ssh -i; relative = desired dir; a regular file not readable by group or others (not hashed: the key does not change the launch)",
      ),
    known_hosts_file: nonEmpty
      .optional()
      .describe(
        "known_hosts file the node's host key is checked against (strictly); relative = desired dir (not hashed: it does not change the launch)",
      ),
  })
  .strict()
  .describe("Reach the node over OpenSSH; no ssh block means the controller's own host");

export const FleetNodeSchema = z
  .object({
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "must be a host name (letters, digits, . _ -)")
      .describe("Host name of the node; engines on one node share GPUs and ports"),
    engines: z
      .array(z.string().regex(IID_PATTERN, 'must be an iid "n<k>" (1 ≤ k ≤ 9999)'))
      .min(1)
      .describe("iids of the engines this host runs"),
    sysfs_root: nonEmpty.optional().describe("sysfs tree host inspection scans; default /sys; relative = desired dir"),
    nvidia_smi: nonEmpty
      .optional()
      .describe("nvidia-smi command; default nvidia-smi; a relative path with / resolves against the desired dir"),
    rocminfo: nonEmpty
      .optional()
      .describe("rocminfo command; default rocminfo; a relative path with / resolves against the desired dir"),
    dev_root: nonEmpty
      .optional()
      .describe("directory under which device paths are checked; default /; relative = desired dir"),
    docker_host: nonEmpty
      .optional()
      .describe(
        "Docker endpoint (DOCKER_HOST syntax) for the container backend; default ssh://<destination>[:port] with ssh, else the local socket",
      ),
    ssh: NodeSshSchema.optional().describe(
      "How the controller reaches the node over OpenSSH; absent: the controller's own host",
    ),
    work_dir: nonEmpty
      .optional()
      .describe(
        "Absolute directory on the node for per-run files (plan, engine.env, key); default /var/lib/narwhal/runs; hashed when not the default",
      ),
  })
  .strict()
  .describe("One host and the engines it runs");

/** One role's TP shape, overriding the fleet-wide one (seed 000 derives both "for each replica"). */
export const RoleHardwareSchema = z
  .object({
    accelerators_per_engine: positiveInt
      .optional()
      .describe("Number of GPUs per engine of this role (= len(gpu_ids)); absent: the fleet-wide value"),
    tensor_parallel: positiveInt
      .optional()
      .describe("TP size per engine of this role (= tensor_parallel_size); absent: the fleet-wide value"),
  })
  .strict()
  .describe("The allocation every engine of one role uses, e.g. prefill TP 2 beside decode TP 4");

export const HardwareSchema = z
  .object({
    accelerator: nonEmpty.describe("Accelerator product every engine uses, as host inspection reports it"),
    accelerators_per_engine: positiveInt
      .optional()
      .describe(
        "Number of GPUs per engine (= len(gpu_ids), seed 000); the default for roles that do not set their own",
      ),
    tensor_parallel: positiveInt
      .optional()
      .describe(
        "TP size per engine (= tensor_parallel_size, seed 000); the default for roles that do not set their own",
      ),
    roles: z
      .record(z.string(), RoleHardwareSchema)
      .optional()
      .describe("Per-role allocation by fleet role name; each field overrides the fleet-wide one for that role"),
  })
  .strict()
  .describe("Fleet-level hardware expectations (seed 000 Gate C); TP shape fleet-wide and/or per role");

/** A count of engines (at least 1) or a share of a role's engines, "N%" (rounded down, at least 1). */
const unavailable = z
  .union(
    [
      z
        .number()
        .int("must be a whole number of engines")
        .min(1, "must be at least 1: with none allowed out of service, no serving engine could ever be replaced"),
      z.string().regex(/^(100|[1-9][0-9]?)%$/, 'must be a count such as 1 or a percentage "1%" to "100%"'),
    ],
    { error: 'must be a count of engines (1, 2, ...) or a percentage such as "25%"' },
  )
  .describe(
    'Engines of a role a rollout may have out of service at once: a count, or "N%" of the role (rounded down, at least 1)',
  );

export const RolloutSchema = z
  .object({
    max_unavailable: z
      .record(role, unavailable)
      .default({})
      .describe('Per role, e.g. {"prefill": 1, "decode": "25%"}; roles not named use default_max_unavailable'),
    default_max_unavailable: unavailable.default(1).describe("For roles not named in max_unavailable; default 1"),
    incompatible: z
      .enum(["pd_units", "recreate"])
      .default("pd_units")
      .describe(
        'Changes that alter the group signature: "pd_units" (default) moves one prefill with one decode at a time, keeping a compatible pair serving; "recreate" replaces them all at once (downtime)',
      ),
  })
  .strict()
  .describe("How pending changes roll out across the fleet; every field optional");

/** A fleet's name: part of its container names (narwhal-<name>-engine-<k>), so a DNS-label-like word. */
export const FLEET_NAME_PATTERN = /^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/;

export const FleetSchema = z
  .object({
    $schema: schemaRef,
    name: z
      .string()
      .regex(FLEET_NAME_PATTERN, "must be 1-32 lower-case letters, digits and inner hyphens, such as prod-a")
      .optional()
      .describe(
        "The fleet's name, unique among fleets sharing a Docker host: its containers are narwhal-<name>-engine-<k>, labelled io.narwhal.fleet=<name>; unset, narwhal-engine-<k>. Renaming a running fleet: narwhal down first",
      ),
    engines: z.array(FleetEngineSchema).min(1, "list at least one engine").describe("Engine records"),
    nodes: z.array(FleetNodeSchema).min(1, "list at least one node").describe("Hosts and the engines each runs"),
    hardware: HardwareSchema,
    rollout: RolloutSchema.optional().describe(
      "Rollout policy (defaults: 1 engine per role out of service, P/D units for incompatible changes)",
    ),
    kv_transfer: KvTransferSchema.optional().describe(
      "KV transfer proofs (defaults: prove every pair, restart a decode once after a failed proof, re-prove after a prefill restart)",
    ),
  })
  .strict()
  .describe("desired/fleet.json");

// gpu_ids: seed 003 says "indices or UUIDs". JSON integers are accepted for
// convenience and normalised to their decimal string, because the launcher
// joins them into CUDA_/ROCR_VISIBLE_DEVICES as text anyway.
const gpuId = z
  .union(
    [z.string().regex(/^[A-Za-z0-9][A-Za-z0-9:._-]*$/, "must be a GPU index or UUID"), z.number().int().nonnegative()],
    { error: "must be a GPU index (integer or string) or UUID" },
  )
  .transform((v) => String(v))
  .describe("GPU index or UUID; integers are normalised to strings");

export const RuntimeSchema = z
  .object({
    expected_packages: z
      .record(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "must be a distribution name"), nonEmpty)
      .refine((p) => Object.keys(p).length > 0, "pin at least vllm and nixl (or nixl-rocm)")
      .meta({ minProperties: 1 }) // the refinement, for the JSON Schema (json-schema.ts)
      .describe('Exact installed versions to check, e.g. {"vllm": "0.11.0", "nixl": "0.6.1"}'),
    model_dtype: z.enum(["bfloat16", "float16"]).describe("Model dtype (--dtype)"),
    kv_cache_dtype: nonEmpty.describe('"auto" or the requested cache dtype (--kv-cache-dtype)'),
    block_size: positiveInt.describe("Requested KV block size (--block-size)"),
    environment: z
      .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"), envValue)
      .default({})
      .describe("Image-local ROCm/CUDA, UCX, NIXL and library-path settings (never launcher-managed ones)"),
    extra_args: z
      .array(z.string())
      .default([])
      .describe("Model-specific vLLM arguments (never launcher-managed flags)"),
  })
  .strict()
  .describe("seed 003 §16 runtime object");

export const TransferSchema = z
  .object({
    transport: z.enum(["ucx_tcp", "ucx_rdma"]).describe("UCX over TCP or RDMA"),
    net_devices: z
      .array(
        nonEmpty.regex(
          /^[^\s\x00-\x1f\x7f]+$/,
          "must be an interface or HCA:port name, without spaces or control characters",
        ),
      )
      .min(1, 'name the fabric interface(s), e.g. "${NARWHAL_FABRIC_INTERFACE}"')
      .describe("Ethernet interfaces (TCP) or HCA:port names (RDMA); joined into UCX_NET_DEVICES"),
    devices: z.array(absolutePath).describe("Transport character devices (RDMA); empty for TCP"),
  })
  .strict()
  .describe("seed 003 §15.1 transfer fields");

export const LaunchRecordSchema = z
  .object({
    role,
    backend: z
      .enum(["native", "container"])
      .default("container")
      .describe("Where the engine runs; seed 001 defaults to container"),
    image: nonEmpty.optional().describe("Container image reference or id (required for the container backend)"),
    accelerator: nonEmpty.describe("Accelerator product; must equal fleet hardware.accelerator"),
    gpu_ids: z.array(gpuId).min(1, "select at least one GPU").describe("Selected GPU indices or UUIDs"),
    tensor_parallel_size: positiveInt.describe("TP size; must equal len(gpu_ids)"),
    gpu_visibility_env: z
      .enum(["CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"])
      .describe("Variable the launcher exports gpu_ids through"),
    accelerator_devices: z.array(absolutePath).describe("Host device paths mapped into the container"),
    network_mode: z.literal("host").describe("Only host networking: ports are allocated per host"),
    transfer: TransferSchema,
    sources: z
      .record(nonEmpty, z.string())
      .default({})
      .describe("Records the allocation, devices and transfer were derived from (informational)"),
    runtime: RuntimeSchema,
    shared_device: SharedDeviceSchema.optional(),
    // Derived by preparation (seed 003 §15.1). Accepted so generated records
    // load unchanged, but rules.ts rejects any value that disagrees with the
    // derivation: two sources of truth for one launch would drift.
    environment: z
      .record(z.string(), z.string())
      .optional()
      .describe(
        "Derived; if present must be exactly {<gpu_visibility_env>: gpu_ids joined, UCX_NET_DEVICES: net_devices joined}",
      ),
    vllm_args: z
      .array(z.string())
      .optional()
      .describe('Derived; if present must be exactly ["--tensor-parallel-size", "<tp>"]'),
  })
  .strict()
  .describe("One launch record (seed 003 §15–16)");

/** A launch record's key; also used alone when the rules take the records that passed (records-for-rules.ts). */
export const EngineNameSchema = z
  .string()
  .regex(ENGINE_NAME_PATTERN, 'engine names are "engine-<k>" with 1 ≤ k ≤ 9999')
  .describe("Launch record name engine-<k>; pairs with fleet iid n<k>");

export const EngineLaunchSchema = z
  .object({
    $schema: schemaRef,
    engines: z
      .record(EngineNameSchema, LaunchRecordSchema)
      .refine((e) => Object.keys(e).length > 0, "list at least one engine")
      .meta({ minProperties: 1 }) // the refinement, for the JSON Schema (json-schema.ts)
      .describe("Launch records keyed engine-<k>"),
  })
  .strict()
  .describe("desired/engine-launch.json");

export type FleetFile = z.output<typeof FleetSchema>;
export type FleetEngine = z.output<typeof FleetEngineSchema>;
export type FleetNode = z.output<typeof FleetNodeSchema>;
export type NodeSsh = z.output<typeof NodeSshSchema>;
export type Hardware = z.output<typeof HardwareSchema>;
export type RolloutBlock = z.output<typeof RolloutSchema>;
export type EngineLaunchFile = z.output<typeof EngineLaunchSchema>;
export type ParsedLaunchRecord = z.output<typeof LaunchRecordSchema>;

/** `$.engines["engine-1"].gpu_ids[0]`-style path from path segments. */
export function jsonPath(segments: ReadonlyArray<PropertyKey>): string {
  let out = "$";
  for (const s of segments) {
    if (typeof s === "number") out += `[${s}]`;
    else if (typeof s === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(s)) out += `.${s}`;
    else out += `[${JSON.stringify(String(s))}]`;
  }
  return out;
}
