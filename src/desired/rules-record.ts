// Rules about one launch record at a time (seed 003 §15–16), sometimes
// compared with fleet-level hardware. Each returns every issue it finds.

import type { ValidationIssue } from "../errors.js";
import type { FleetForRules, SchemaFailures } from "./records-for-rules.js";
import { jsonPath, type EngineLaunchFile, type ParsedLaunchRecord } from "./schemas.js";
import { ENV_FILE } from "./rules-variables.js";

export const FLEET_FILE = "fleet.json";
export const LAUNCH_FILE = "engine-launch.json";

/** Flags the launcher writes itself (seed 003 §16); extra_args must not override them. */
export const LAUNCHER_MANAGED_FLAGS: ReadonlySet<string> = new Set([
  "--host", "--port", "--model", "--served-model-name", "--tensor-parallel-size", "-tp",
  "--kv-transfer-config", "--api-key", "--enable-prefix-caching", "--no-enable-prefix-caching",
  "--dtype", "--kv-cache-dtype", "--block-size", "--trust-remote-code", "--no-trust-remote-code",
]);

/** Environment the launcher sets itself; runtime.environment must not set it. */
export const LAUNCHER_MANAGED_ENV: ReadonlySet<string> = new Set([
  "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "UCX_TLS", "UCX_NET_DEVICES",
  "VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_PORT", "VLLM_API_KEY",
]);

export interface LaunchContext { vars: Readonly<Record<string, string>>; launch: EngineLaunchFile }
export interface FullContext extends LaunchContext { fleet: FleetForRules; failures: SchemaFailures }

export type RecordRule =
  | { name: string; needs: "launch"; check(ctx: LaunchContext): ValidationIssue[] }
  | { name: string; needs: "both"; check(ctx: FullContext): ValidationIssue[] };

export const recPath = (name: string, ...segments: PropertyKey[]) => jsonPath(["engines", name, ...segments]);
const issue = (rule: string, name: string, segments: PropertyKey[], message: string): ValidationIssue =>
  ({ file: LAUNCH_FILE, path: recPath(name, ...segments), message, rule });

/** Apply `fn` to every launch record and concatenate its issues. */
const eachRecord = (launch: EngineLaunchFile, fn: (name: string, r: ParsedLaunchRecord) => ValidationIssue[]) =>
  Object.entries(launch.engines).flatMap(([name, r]) => fn(name, r));

/** Normalise a vLLM flag the way its parser does: "--a_b=x" → "--a-b". */
export function flagName(arg: string): string | undefined {
  if (!arg.startsWith("-")) return undefined;
  const name = arg.split("=", 1)[0] as string;
  return name.startsWith("--") ? "--" + name.slice(2).replace(/_/g, "-") : name;
}

/**
 * The launcher-managed flag an extra_args element would set as vLLM's parser
 * reads it, and why: written out ("--port", "--port=1", "--tensor_parallel_size"),
 * one key of a JSON flag in vLLM's dotted form ("--kv-transfer-config.kv_role"),
 * an abbreviation argparse expands (allow_abbrev is on in vLLM: "--tensor-parallel"),
 * or "--config", which loads arguments from a file narwhal cannot check.
 */
export function managedFlagOf(arg: string): { flag: string; how: "exact" | "dotted" | "abbreviation" | "config" } | undefined {
  const name = flagName(arg);
  if (name === undefined || name === "-" || name === "--") return undefined;
  const base = name.startsWith("--") ? (name.split(".", 1)[0] as string) : name;
  if (LAUNCHER_MANAGED_FLAGS.has(base)) return { flag: base, how: base === name ? "exact" : "dotted" };
  if (base === "--config") return { flag: base, how: "config" };
  const dashes = base.startsWith("--") ? 2 : 1;
  const body = base.slice(dashes);
  if (body.length === 0) return undefined;
  for (const m of LAUNCHER_MANAGED_FLAGS) {
    const mDashes = m.startsWith("--") ? 2 : 1;
    if (mDashes === dashes && m.startsWith(base)) return { flag: m, how: "abbreviation" };
  }
  return undefined;
}

/** What preparation derives under `environment` and `vllm_args` (seed 003 §15.1). */
export function derivedLaunchFields(r: Pick<ParsedLaunchRecord, "gpu_visibility_env" | "gpu_ids" | "transfer" | "tensor_parallel_size">) {
  return {
    environment: { [r.gpu_visibility_env]: r.gpu_ids.join(","), UCX_NET_DEVICES: r.transfer.net_devices.join(",") },
    vllm_args: ["--tensor-parallel-size", String(r.tensor_parallel_size)],
  };
}

export const recordRules: RecordRule[] = [
  {
    name: "tp-equals-gpu-count",
    needs: "launch",
    check: ({ launch }) => eachRecord(launch, (name, r) =>
      r.tensor_parallel_size === r.gpu_ids.length ? [] : [issue("tp-equals-gpu-count", name, ["tensor_parallel_size"],
        `${name}: tensor_parallel_size is ${r.tensor_parallel_size} but gpu_ids selects ${r.gpu_ids.length} GPU(s); they must be equal`)]),
  },
  {
    name: "gpu-ids-unique",
    needs: "launch",
    check: ({ launch }) => eachRecord(launch, (name, r) =>
      r.gpu_ids.flatMap((id, i) => r.gpu_ids.indexOf(id) === i ? [] : [issue("gpu-ids-unique", name, ["gpu_ids", i],
        `${name}: GPU "${id}" is selected twice`)])),
  },
  {
    name: "hardware-matches-allocation",
    needs: "both",
    check: ({ launch, fleet }) => eachRecord(launch, (name, r) => {
      const hw = fleet.hardware;
      const out: ValidationIssue[] = [];
      if (!hw) return out; // hardware failed its schema; reported there
      if (hw.accelerators_per_engine !== r.gpu_ids.length) {
        out.push({ file: FLEET_FILE, path: "$.hardware.accelerators_per_engine", rule: "hardware-matches-allocation",
          message: `is ${hw.accelerators_per_engine} but ${name} selects ${r.gpu_ids.length} GPU(s); set it to the number of gpu_ids (seed 000)` });
      }
      if (hw.tensor_parallel !== r.tensor_parallel_size) {
        out.push({ file: FLEET_FILE, path: "$.hardware.tensor_parallel", rule: "hardware-matches-allocation",
          message: `is ${hw.tensor_parallel} but ${name} has tensor_parallel_size ${r.tensor_parallel_size}; set it to tensor_parallel_size (seed 000)` });
      }
      return out;
    }),
  },
  {
    name: "accelerator-matches-hardware",
    needs: "both",
    check: ({ launch, fleet }) => eachRecord(launch, (name, r) =>
      !fleet.hardware || r.accelerator === fleet.hardware.accelerator ? [] : [issue("accelerator-matches-hardware", name, ["accelerator"],
        `${name}: accelerator "${r.accelerator}" differs from fleet.json hardware.accelerator "${fleet.hardware.accelerator}"`)]),
  },
  {
    name: "rocm-devices",
    needs: "launch",
    check: ({ launch }) => eachRecord(launch, (name, r) => {
      if (r.gpu_visibility_env !== "ROCR_VISIBLE_DEVICES") return [];
      const out: ValidationIssue[] = [];
      if (!r.accelerator_devices.includes("/dev/kfd")) {
        out.push(issue("rocm-devices", name, ["accelerator_devices"], `${name}: ROCm engines need /dev/kfd in accelerator_devices`));
      }
      if (!r.accelerator_devices.some((d) => d.startsWith("/dev/dri/"))) {
        out.push(issue("rocm-devices", name, ["accelerator_devices"],
          `${name}: ROCm engines need the DRI devices of their GPUs (/dev/dri/renderD<n>) in accelerator_devices`));
      }
      return out;
    }),
  },
  {
    name: "transfer-devices",
    needs: "launch",
    check: ({ launch }) => eachRecord(launch, (name, r) => {
      const { transport, devices } = r.transfer;
      if (transport === "ucx_rdma" && devices.length === 0) {
        return [issue("transfer-devices", name, ["transfer", "devices"],
          `${name}: ucx_rdma needs its RDMA character devices (e.g. /dev/infiniband/uverbs0, /dev/infiniband/rdma_cm)`)];
      }
      if (transport === "ucx_tcp" && devices.length > 0) {
        return [issue("transfer-devices", name, ["transfer", "devices"], `${name}: ucx_tcp uses an empty devices list`)];
      }
      return [];
    }),
  },
  {
    name: "extra-args-managed",
    needs: "launch",
    check: ({ launch }) => eachRecord(launch, (name, r) => r.runtime.extra_args.flatMap((arg, i) => {
      const managed = managedFlagOf(arg);
      if (!managed) return [];
      const { flag, how } = managed;
      const fix = "remove it from runtime.extra_args (change the launch record field or deployment variable instead)";
      const message =
        how === "config" ? `${name}: --config loads vLLM arguments from a file narwhal cannot check against the launcher-managed flags; write them in runtime.extra_args instead`
        : how === "abbreviation" ? `${name}: ${JSON.stringify(arg)} abbreviates ${flag} (vLLM's parser expands unambiguous prefixes), which is set by the launcher; ${fix}`
        : how === "dotted" ? `${name}: ${JSON.stringify(arg)} sets part of ${flag}, which is set by the launcher; ${fix}`
        : `${name}: ${flag} is set by the launcher; ${fix}`;
      return [issue("extra-args-managed", name, ["runtime", "extra_args", i], message)];
    })),
  },
  {
    name: "runtime-env-managed",
    needs: "launch",
    check: ({ launch }) => eachRecord(launch, (name, r) => Object.keys(r.runtime.environment).flatMap((key) =>
      LAUNCHER_MANAGED_ENV.has(key)
        ? [issue("runtime-env-managed", name, ["runtime", "environment", key],
          `${name}: ${key} is set by the launcher from gpu_ids, transfer and node variables; remove it from runtime.environment`)]
        : [])),
  },
  {
    name: "derived-fields-agree",
    needs: "launch",
    check: ({ launch }) => eachRecord(launch, (name, r) => {
      const want = derivedLaunchFields(r);
      const out: ValidationIssue[] = [];
      if (r.environment !== undefined && canonical(r.environment) !== canonical(want.environment)) {
        out.push(issue("derived-fields-agree", name, ["environment"],
          `${name}: environment is derived and must be ${JSON.stringify(want.environment)}; remove it or correct gpu_ids/net_devices`));
      }
      if (r.vllm_args !== undefined && JSON.stringify(r.vllm_args) !== JSON.stringify(want.vllm_args)) {
        out.push(issue("derived-fields-agree", name, ["vllm_args"],
          `${name}: vllm_args is derived and must be ${JSON.stringify(want.vllm_args)}; remove it or correct tensor_parallel_size`));
      }
      return out;
    }),
  },
  {
    name: "container-image",
    needs: "launch",
    check: ({ launch }) => eachRecord(launch, (name, r) =>
      r.backend === "container" && r.image === undefined
        ? [issue("container-image", name, ["image"], `${name}: the container backend needs image (an image id or pinned reference)`)]
        : []),
  },
  {
    name: "native-revision",
    needs: "launch",
    check: ({ launch, vars }) => {
      const natives = Object.entries(launch.engines).filter(([, r]) => r.backend === "native").map(([n]) => n);
      if (natives.length === 0 || (vars["NARWHAL_MODEL_REVISION"] ?? "") !== "") return [];
      return [{ file: ENV_FILE, path: "$.NARWHAL_MODEL_REVISION", rule: "native-revision",
        message: `${natives.join(", ")} use the native backend, which requires NARWHAL_MODEL_REVISION (seed 001); set it` }];
    },
  },
];

function canonical(o: Record<string, string>): string {
  return JSON.stringify(Object.keys(o).sort().map((k) => [k, o[k]]));
}
