// What the launcher writes itself (seed 003 §15–16): the vLLM flags and the
// environment it sets, how vLLM's parser would read a flag in extra_args, and
// the fields preparation derives. Launch records and role additions must not
// set these; the rules that say so are rules-record-managed.ts and
// rules-launch-extras.ts.

import type { ParsedLaunchRecord } from "./schemas.js";

/** Flags the launcher writes itself (seed 003 §16); extra_args must not override them. */
export const LAUNCHER_MANAGED_FLAGS: ReadonlySet<string> = new Set([
  "--host",
  "--port",
  "--model",
  "--served-model-name",
  "--tensor-parallel-size",
  "-tp",
  "--kv-transfer-config",
  "--api-key",
  "--enable-prefix-caching",
  "--no-enable-prefix-caching",
  "--dtype",
  "--kv-cache-dtype",
  "--block-size",
  // --trust-remote-code is the operator's opt-in (remote-code.ts); the negation only restates the default.
  "--no-trust-remote-code",
]);

/** Environment the launcher sets itself; runtime.environment must not set it. */
export const LAUNCHER_MANAGED_ENV: ReadonlySet<string> = new Set([
  "CUDA_VISIBLE_DEVICES",
  "ROCR_VISIBLE_DEVICES",
  "UCX_TLS",
  "UCX_NET_DEVICES",
  "VLLM_NIXL_SIDE_CHANNEL_HOST",
  "VLLM_NIXL_SIDE_CHANNEL_PORT",
  "VLLM_API_KEY",
]);

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
export function managedFlagOf(
  arg: string,
): { flag: string; how: "exact" | "dotted" | "abbreviation" | "config" } | undefined {
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
export function derivedLaunchFields(
  r: Pick<ParsedLaunchRecord, "gpu_visibility_env" | "gpu_ids" | "transfer" | "tensor_parallel_size">,
) {
  return {
    environment: { [r.gpu_visibility_env]: r.gpu_ids.join(","), UCX_NET_DEVICES: r.transfer.net_devices.join(",") },
    vllm_args: ["--tensor-parallel-size", String(r.tensor_parallel_size)],
  };
}
