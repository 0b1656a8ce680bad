// P/D pair compatibility before anything starts: vLLM's NixlConnector refuses
// the handshake of a decode whose NIXL compatibility hash differs from its
// prefill's (nixl_connector.py compute_nixl_compatibility_hash), so a fleet in
// which no prefill/decode pair can agree never transfers KV. From desired alone
// narwhal knows some of the hash's inputs; it compares those and leaves the
// rest (connector version, model dimensions, a default attention backend) to
// the checked runtime's nixl-compat.json.

import type { ValidationIssue } from "../errors.js";
import { pairEngines, type EnginePair } from "./engine-pairs.js";
import { launchIssue, type FleetRule } from "./rule-context.js";
import { attentionBackend, differingFactors, torchDtype, type NixlCompatFactors } from "../phases/nixl-compat.js";
import { inRuntime, lastFlagValue } from "../phases/plan.js";

/** The desired input that sets each compatibility input, for the fix. */
const SOURCE: Partial<Record<keyof NixlCompatFactors, string>> = {
  vllm_version: "runtime.expected_packages.vllm",
  model: "backend (the --model path: a container mounts the model at /model, a native engine passes the host path)",
  dtype: "runtime.model_dtype",
  cache_dtype: "runtime.kv_cache_dtype",
  attn_backend_name: "runtime.environment.VLLM_ATTENTION_BACKEND or --attention-backend in runtime.extra_args",
};

/** The compatibility inputs the desired state fixes for one engine (unknown ones are absent). */
export function desiredCompatInputs(p: EnginePair, vars: Readonly<Record<string, string>>): Partial<NixlCompatFactors> {
  const rt = p.record.runtime;
  const dir = Object.hasOwn(vars, "NARWHAL_MODEL_DIR") ? vars.NARWHAL_MODEL_DIR! : "";
  const hostModel = Object.hasOwn(vars, "NARWHAL_MODEL_PATH") ? vars.NARWHAL_MODEL_PATH! : dir;
  const vendor = p.record.gpu_visibility_env === "CUDA_VISIBLE_DEVICES" ? "nvidia" : "amd";
  // The platform default is a guess: at validate time only a backend the operator set is compared.
  const backend = attentionBackend(rt.extra_args, rt.environment, vendor, false);
  const vllm = rt.expected_packages.vllm;
  return {
    ...(vllm === undefined ? {} : { vllm_version: vllm }),
    model: inRuntime({ backend: p.record.backend, model: { dir } }, hostModel),
    dtype: torchDtype(lastFlagValue(rt.extra_args, "--dtype") ?? rt.model_dtype, undefined),
    cache_dtype: lastFlagValue(rt.extra_args, "--kv-cache-dtype") ?? rt.kv_cache_dtype,
    ...(backend.source === "platform default" ? {} : { attn_backend_name: backend.name }),
  };
}

const show = (v: unknown) => JSON.stringify(v);

export const nixlCompatRules: FleetRule[] = [
  {
    name: "pd-nixl-compatible",
    needs: "both",
    check: ({ vars, fleet, launch }): ValidationIssue[] => {
      const pairs = pairEngines(fleet, launch);
      const prefills = pairs.filter((p) => p.fleet.role === "prefill");
      const decodes = pairs.filter((p) => p.fleet.role === "decode");
      if (!prefills.length || !decodes.length) return [];
      const inputs = new Map(pairs.map((p) => [p.name, desiredCompatInputs(p, vars)]));
      const diffs = prefills.flatMap((pf) =>
        decodes.map((d) => ({ pf, d, keys: differingFactors(inputs.get(pf.name)!, inputs.get(d.name)!) })),
      );
      if (diffs.some((x) => x.keys.length === 0)) return [];
      const described = diffs.map(({ pf, d, keys }) => {
        const a = inputs.get(pf.name)!;
        const b = inputs.get(d.name)!;
        const what = keys.map((k) => `${k} ${show(a[k])} vs ${show(b[k])} (${SOURCE[k] ?? k})`).join(", ");
        return `${pf.name} (prefill) / ${d.name} (decode): ${what}`;
      });
      return [
        launchIssue(
          "pd-nixl-compatible",
          decodes[0]!.name,
          [],
          `no prefill/decode pair has equal NIXL compatibility inputs, so vLLM's NixlConnector refuses every handshake and no KV can move: ${described.join("; ")}; give at least one prefill and one decode the same values for those inputs`,
        ),
      ];
    },
  },
];
