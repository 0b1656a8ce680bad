// Naming the input fields a change touches: a leaf-by-leaf comparison of two
// inputHashMaterial outputs (what the controller applied, what desired/ says
// now), each leaf named by its JSON path and marked when it feeds the group
// signature (old and new engines could then not pair). Pure.
import { canonicalJson } from "../desired/hash.js";
import { jsonPath } from "../desired/schemas.js";
import { lastFlagValue } from "../phases/plan.js";
import type { FieldChange } from "./plan-types.js";

/**
 * Input paths that feed seed 000's group signature (src/desired/hash.ts GroupSignatureInputs):
 * the image or native runtime identity, the model, the accelerator, TP size, the visibility
 * variable, the runtime record and the transport. A path is a group field when it is one of
 * these or lies under one.
 */
export const GROUP_FIELDS: readonly string[] = [
  "backend",
  "python",
  "launch.backend",
  "launch.image",
  "launch.accelerator",
  "launch.tensor_parallel_size",
  "launch.gpu_visibility_env",
  "launch.runtime",
  "launch.transfer.transport",
  "model.dir",
  "model.config_sha256",
  "model.revision",
  "model.path",
  // Not hashed into the signature (seed-exact), but engines of one signature must hold one tree:
  // a pinned tree changed is other weights, which old and new engines cannot pair across.
  "model.tree_sha256",
];

/**
 * Deployment variables that set a field outright (spec.ts), so a plan can say which line of
 * deployment.env an edit came from. Fields a variable only adds to (NARWHAL_ENGINE_ARGS after a
 * record's extra_args) or derives (URLs from node IPs) are named by the field alone.
 */
const VARIABLE_OF: Readonly<Record<string, string>> = {
  "model.dir": "NARWHAL_MODEL_DIR",
  "model.config_sha256": "NARWHAL_MODEL_CONFIG_SHA256",
  "model.served_name": "NARWHAL_ENGINE_MODEL_NAME",
  "model.revision": "NARWHAL_MODEL_REVISION",
  "model.path": "NARWHAL_MODEL_PATH",
  "model.tree_sha256": "NARWHAL_MODEL_TREE_SHA256",
  python: "NARWHAL_NATIVE_PYTHON",
  api_key_sha256: "NARWHAL_ENGINE_API_KEY",
  fabric_interface: "NARWHAL_FABRIC_INTERFACE",
};

/** The API key's digest is never printed: a plan is shown and saved. */
const SECRET_FIELDS = new Set(["api_key_sha256"]);
const HIDDEN = "(changed)";

export function isGroupField(path: string): boolean {
  return GROUP_FIELDS.some((g) => path === g || path.startsWith(g + ".") || path.startsWith(g + "["));
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

/** "launch.runtime.extra_args[2]" from segments (jsonPath's form without its "$" root). */
function pathOf(segments: ReadonlyArray<string | number>): string {
  const p = jsonPath(segments).slice(1);
  return p.startsWith(".") ? p.slice(1) : p;
}

/** Leaves are mostly primitives: compared directly; anything else (a shape change) by canonical JSON. */
function same(a: unknown, b: unknown): boolean {
  const x = a ?? null;
  const y = b ?? null;
  if (x === y) return true;
  if (typeof x !== "object" || typeof y !== "object") return false;
  return canonicalJson(x) === canonicalJson(y);
}

/**
 * Every changed leaf between `applied` and `desired`, in path order. A field present on one side
 * only is compared with null; arrays are compared index by index, so an appended argument is
 * `extra_args[2]: null → "--x"`.
 */
export function fieldDiff(applied: Record<string, unknown>, desired: Record<string, unknown>): FieldChange[] {
  const out: FieldChange[] = [];
  const segments: Array<string | number> = [];
  const walk = (a: unknown, b: unknown): void => {
    if (isObject(a) && isObject(b)) {
      const keys = Object.keys(a);
      for (const k of Object.keys(b)) if (!Object.hasOwn(a, k)) keys.push(k);
      for (const k of keys.sort()) {
        segments.push(k);
        walk(a[k], b[k]);
        segments.pop();
      }
      return;
    }
    if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = 0; i < Math.max(a.length, b.length); i++) {
        segments.push(i);
        walk(a[i], b[i]);
        segments.pop();
      }
      return;
    }
    if (same(a, b)) return;
    const path = pathOf(segments);
    const secret = SECRET_FIELDS.has(String(segments[0]));
    out.push({
      path,
      old: secret ? HIDDEN : (a ?? null),
      new: secret ? HIDDEN : (b ?? null),
      group: isGroupField(path),
    });
  };
  walk(applied, desired);
  return out;
}

/** What a replace carries: the fields (null when the applied inputs were not recorded) and whether the group changes. */
export interface ChangeSummary {
  fields: FieldChange[] | null;
  group_changes: boolean;
}

/** Unrecorded applied inputs cannot be compared: the change is assumed incompatible (the safe side). */
export function summarizeChange(
  applied: Record<string, unknown> | null,
  desired: Record<string, unknown>,
): ChangeSummary {
  if (applied === null) return { fields: null, group_changes: true };
  const fields = fieldDiff(applied, desired);
  return { fields, group_changes: fields.some((f) => f.group) };
}

/** One line naming the fields: `launch.runtime.extra_args[2] (null → "--x"), launch.image (…)`, at most `max`. */
export function describeFields(summary: ChangeSummary, max = 3): string {
  if (summary.fields === null)
    return "the applied inputs were not recorded, so the changed fields cannot be named (assumed to change the group signature)";
  if (summary.fields.length === 0) return "no recorded input field differs, only the input hash";
  const shown = summary.fields.slice(0, max).map((f) => {
    const variable = VARIABLE_OF[f.path];
    return `${f.path}${variable ? ` (deployment.env ${variable})` : ""} (${JSON.stringify(f.old)} → ${JSON.stringify(f.new)})`;
  });
  const more = summary.fields.length > max ? ` and ${summary.fields.length - max} more` : "";
  return `${shown.join(", ")}${more}${summary.group_changes ? "; changes the group signature" : ""}`;
}

/**
 * The group-relevant inputs of an engine as one key: engines with equal keys are predicted to
 * share a group signature once started (the image id itself is only known after inspection).
 */
export function predictedGroupKey(inputs: Record<string, unknown>): string {
  return canonicalJson(pickPaths(inputs, GROUP_FIELDS));
}

function pickPaths(inputs: Record<string, unknown>, paths: readonly string[]): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const path of paths) {
    let v: unknown = inputs;
    for (const s of path.split(".")) v = isObject(v) ? v[s] : undefined;
    picked[path] = v ?? null;
  }
  return picked;
}

/**
 * Input paths that set what vLLM pairs a prefill and a decode by (kv-pairs.ts): the NIXL
 * compatibility hash's inputs as desired fixes them (the runtime's vLLM, the --model string by
 * backend and model path, dtype, cache dtype, attention backend), the model tree, and the block
 * size the handshake compares. Not TP (the handshake judges its ratio; validate refuses a bad one).
 */
const PAIR_FIELDS: readonly string[] = [
  "backend",
  "python",
  "launch.image",
  "launch.gpu_visibility_env",
  "launch.runtime.expected_packages.vllm",
  "launch.runtime.model_dtype",
  "launch.runtime.kv_cache_dtype",
  "launch.runtime.block_size",
  "launch.runtime.environment.VLLM_ATTENTION_BACKEND",
  "launch.runtime.environment.VLLM_MLA_DISABLE",
  "model.dir",
  "model.path",
  "model.config_sha256",
  "model.revision",
  "model.tree_sha256",
];
const PAIR_FLAGS = ["--dtype", "--kv-cache-dtype", "--attention-backend", "--block-size"];

/** The pairing inputs of an engine as one key: engines with equal keys are predicted to pair once started. */
export function predictedPairKey(inputs: Record<string, unknown>): string {
  const args = pickPaths(inputs, ["launch.runtime.extra_args"])["launch.runtime.extra_args"];
  const list = Array.isArray(args) ? args.map(String) : [];
  const flags = Object.fromEntries(PAIR_FLAGS.map((f) => [f, lastFlagValue(list, f) ?? null]));
  return canonicalJson({ ...pickPaths(inputs, PAIR_FIELDS), flags });
}
