// Hashes over engine specs.
// - inputHash: "did anything that shapes this engine's launch change?" The
//   controller compares it with the running engine's label (like compose's
//   config-hash) and replaces the engine when it differs.
// - groupSignature: seed 000's cache-equivalence group, computed exactly as
//   the seed's Python does so signatures agree with the seed's tools.

import { createHash } from "node:crypto";
import type { EngineSpec, GpuVisibilityEnv, RuntimeRecord, Secret, Transport } from "./types.js";
import { DEFAULT_WORK_DIR } from "./node-host.js";
import { compareCodePoints, pythonJsonDumps } from "./python-json.js";

export { pythonJsonDumps, pythonFloatRepr, compareCodePoints, type PythonJsonOptions } from "./python-json.js";

/**
 * Bumped whenever the set of hashed fields changes, so old and new hashes never
 * collide. A new field that is hashed only when set to something other than
 * what engines ran with before it existed (node.ssh: the local host; node.work_dir:
 * the default) needs no bump: every hash made before it is the hash of that
 * value, and bumping would replace every engine of every fleet on upgrade.
 * The launcher digest (spec.launcher, src/launcher.ts) is the one field meant to
 * change every hash: a new narwhal version, shipped script or plan format makes
 * plans that mean something else, and seed 000 asks for a new prepared run when
 * the launcher changes — replacing every engine on such an upgrade is the point.
 * It needs no bump here either: its own parts say which launcher made a hash.
 */
export const INPUT_HASH_VERSION = 1;

export const sha256Hex = (data: string | Uint8Array): string => createHash("sha256").update(data).digest("hex");

/**
 * Canonical JSON: keys sorted (by code point), no whitespace, undefined fields omitted, toJSON() honoured.
 * `known`: objects whose canonical JSON the caller has already (the same object in many values: buildSpecs'
 * launcher and model, in every engine's input hash); they must not change while `known` is used.
 */
export function canonicalJson(value: unknown, known?: ReadonlyMap<object, string>): string {
  // A plan computes this for every engine (2 MB at 1000 engines), once, cold: it runs mostly unoptimised,
  // so the plain forms below count. Keys are quoted once per call (they repeat across an input's objects), and
  // sorted by the engine's own sort unless one holds a surrogate: without surrogates, UTF-16 order is
  // code-point order (side by side, a fresh process per run, 1000 specs: 72 -> 43 ms).
  const quoted = new Map<string, string>();
  const quote = (k: string): string => {
    let q = quoted.get(k);
    if (q === undefined) quoted.set(k, (q = JSON.stringify(k)));
    return q;
  };
  const enc = (v: unknown): string | undefined => {
    const done = known !== undefined && v !== null && typeof v === "object" ? known.get(v) : undefined;
    if (done !== undefined) return done;
    if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function") {
      v = (v as { toJSON(): unknown }).toJSON();
    }
    if (v === undefined || typeof v === "function" || typeof v === "symbol") return undefined;
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "number" && !Number.isFinite(v)) throw new TypeError("canonicalJson: non-finite number");
    if (v === null || typeof v !== "object") return JSON.stringify(v);
    if (Array.isArray(v)) {
      let out = "[";
      for (let i = 0; i < v.length; i++) out += (i ? "," : "") + (enc(v[i]) ?? "null");
      return out + "]";
    }
    const keys = Object.keys(v);
    if (keys.some((k) => SURROGATE.test(k))) keys.sort(compareCodePoints);
    else keys.sort();
    let out = "{";
    for (const k of keys) {
      const e = enc((v as Record<string, unknown>)[k]);
      if (e !== undefined) out += (out.length > 1 ? "," : "") + quote(k) + ":" + e;
    }
    return out + "}";
  };
  return enc(value) ?? "null";
}

const SURROGATE = /[\uD800-\uDFFF]/;

/**
 * The part of a spec that can change the launch, as hashed. Left out:
 * `input_hash` itself; `ready_seconds` (only how long readiness is awaited);
 * `attestation_url`/`attestation_port` (the attestation sidecar is served
 * beside the engine and never reaches vLLM's command line or environment);
 * the node's ssh `identity_file`/`known_hosts_file` (how the controller logs
 * in, not what runs). The ssh destination and port say which host the engine
 * runs on, so they count; so does a `work_dir` other than the default (where
 * the plan lives on the node), left out at the default (see INPUT_HASH_VERSION).
 * The launcher digest and its parts count (see INPUT_HASH_VERSION), so a plan
 * names the part that changed; the operator's pin on it (`launcher_pin`) does not: it only gates prepare,
 * and setting it to the digest engines already run from must replace none of them. The API key changes `--api-key`, so it counts — as the sha256 of its value,
 * never in clear, because the hash is a visible container label. The fleet's `name` does not: it names
 * containers, and naming a running fleet must replace none of its engines.
 */
export function inputHashMaterial(spec: Omit<EngineSpec, "input_hash"> | EngineSpec): Record<string, unknown> {
  const {
    api_key,
    ready_seconds: _r,
    attestation_url: _a,
    attestation_port: _p,
    launcher_pin: _l,
    fleet: _f,
    node,
    ...rest
  } = spec as EngineSpec;
  const { ssh, work_dir, ...nodeRest } = node;
  const material: Record<string, unknown> = {
    ...rest,
    node: {
      ...nodeRest,
      ...(ssh === undefined ? {} : { ssh: { destination: ssh.destination, port: ssh.port } }),
      ...(work_dir === DEFAULT_WORK_DIR ? {} : { work_dir }),
    },
    hash_version: INPUT_HASH_VERSION,
  };
  delete material["input_hash"];
  material["api_key_sha256"] = api_key === undefined ? null : keyDigest(api_key);
  return material;
}

/** The sha256 of each Secret's value, once per Secret (an immutable one is shared by a fleet's specs). */
const keyDigests = new WeakMap<Secret, string>();
function keyDigest(key: Secret): string {
  let digest = keyDigests.get(key);
  if (digest === undefined) keyDigests.set(key, (digest = sha256Hex(key.reveal())));
  return digest;
}

/** sha256 hex of the canonical JSON of inputHashMaterial(spec); `known` as canonicalJson's. */
export function inputHash(
  spec: Omit<EngineSpec, "input_hash"> | EngineSpec,
  known?: ReadonlyMap<object, string>,
): string {
  return sha256Hex(canonicalJson(inputHashMaterial(spec), known));
}

/** The inputs of seed 000's cache-equivalence group signature. */
export interface GroupSignatureInputs {
  /** Image ID (container) or native runtime identity. */
  image_id: string;
  model_config_sha256: string;
  accelerator: string;
  tensor_parallel_size: number;
  gpu_visibility_env: GpuVisibilityEnv;
  runtime: RuntimeRecord;
  transport: Transport;
}

/**
 * seed 000: `hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]`.
 * Only the seven named fields are hashed, whatever else the argument carries.
 *
 * The whole checkpoint's tree digest (model-manifest.json) is deliberately not one of them, so the
 * signature keeps agreeing with seed 000's PY_CACHE_GROUPS. It is an invariant of the group instead:
 * two engines of one signature never hold different tree digests. Inspection enforces it
 * (phases/checkpoint-agreement.ts: an engine whose node holds another tree than the engines of the
 * same model.dir and config.json inspected before it fails inspection; with NARWHAL_MODEL_TREE_SHA256
 * set, every engine's tree must equal the pin), and a changed pin counts as a group change in plans
 * (controller/field-diff.ts GROUP_FIELDS).
 */
export function groupSignature(inputs: GroupSignatureInputs): string {
  const picked = {
    image_id: inputs.image_id,
    model_config_sha256: inputs.model_config_sha256,
    accelerator: inputs.accelerator,
    tensor_parallel_size: inputs.tensor_parallel_size,
    gpu_visibility_env: inputs.gpu_visibility_env,
    runtime: inputs.runtime,
    transport: inputs.transport,
  };
  // ensure_ascii output is pure ASCII, so .encode() in Python and UTF-8 here agree.
  return sha256Hex(pythonJsonDumps(picked, { sortKeys: true })).slice(0, 16);
}
