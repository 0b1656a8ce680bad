// P/D pair compatibility before anything starts: vLLM's NixlConnector refuses
// the handshake of a decode whose NIXL compatibility hash differs from its
// prefill's (nixl_connector.py compute_nixl_compatibility_hash), so a fleet in
// which no prefill/decode pair can agree never transfers KV. From desired alone
// narwhal knows some of the hash's inputs; it compares those and leaves the
// rest (connector version, model dimensions, a default attention backend) to
// the checked runtime's nixl-compat.json. TP is not hashed (vLLM checks it at
// the handshake), so pd-handshake-tp refuses here what that handshake would:
// a pair whose hashed inputs agree but whose TP ratio or block size it rejects.

import type { ValidationIssue } from "../errors.js";
import type { EnginePair } from "./engine-pairs.js";
import { launchIssue, type FleetRule } from "./rule-context.js";
import {
  attentionBackend,
  differingFactors,
  torchDtype,
  tpRatioRefusal,
  type NixlCompatFactors,
} from "../phases/nixl-compat.js";
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
    check: ({ vars, pairs }): ValidationIssue[] => {
      const prefills = pairs.filter((p) => p.fleet.role === "prefill");
      const decodes = pairs.filter((p) => p.fleet.role === "decode");
      if (!prefills.length || !decodes.length) return [];
      const inputs = new Map(pairs.map((p) => [p.name, desiredCompatInputs(p, vars)]));
      // Engines with equal inputs agree or differ alike: one pair of each pair of kinds decides.
      const prefillKinds = [...kindsOf(prefills, inputs).values()];
      const decodeKinds = [...kindsOf(decodes, inputs).values()];
      if (prefillKinds.some((a) => decodeKinds.some((b) => differingFactors(a.inputs, b.inputs).length === 0)))
        return [];
      const diffs = prefills.flatMap((pf) =>
        decodes.map((d) => ({ pf, d, keys: differingFactors(inputs.get(pf.name)!, inputs.get(d.name)!) })),
      );
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
  {
    name: "pd-handshake-tp",
    needs: "both",
    check: ({ vars, pairs }): ValidationIssue[] => {
      const inputs = new Map(pairs.map((p) => [p.name, desiredCompatInputs(p, vars)]));
      const prefills = pairs.filter((p) => p.fleet.role === "prefill");
      const prefillKinds = [...kindsOf(prefills, inputs, handshakeKey).values()];
      // The prefills a decode of one kind would handshake with and be refused by, found once per kind:
      // whether a pair is refused depends only on what the kind key holds (inputs, TP, block size).
      const refusing = new Map<string, Set<EnginePair>>();
      const refusingFor = (d: EnginePair, key: string): Set<EnginePair> => {
        let found = refusing.get(key);
        if (found) return found;
        found = new Set(
          prefillKinds
            .filter((k) => differingFactors(k.inputs, inputs.get(d.name)!).length === 0)
            .filter((k) => handshakeIssues(k.members[0]!, d).length > 0)
            .flatMap((k) => k.members),
        );
        refusing.set(key, found);
        return found;
      };
      // Only pairs whose hashed inputs agree would handshake at all (pd-nixl-compatible judges the others);
      // the router pairs any listed prefill with any listed decode, so each such pair must be accepted.
      return pairs
        .filter((d) => d.fleet.role === "decode")
        .flatMap((d) => {
          const refused = refusingFor(d, handshakeKey(d, inputs.get(d.name)!));
          return refused.size === 0
            ? []
            : prefills.filter((pf) => refused.has(pf)).flatMap((pf) => handshakeIssues(pf, d));
        });
    },
  },
];

interface Kind {
  inputs: Partial<NixlCompatFactors>;
  members: EnginePair[];
}

const inputsKey = (_p: EnginePair, inputs: Partial<NixlCompatFactors>) => JSON.stringify(inputs);
/** What a handshake's outcome depends on: the compatibility inputs, TP and block size. */
const handshakeKey = (p: EnginePair, inputs: Partial<NixlCompatFactors>) =>
  JSON.stringify([inputs, p.record.tensor_parallel_size, p.record.runtime.block_size]);

/**
 * Engines grouped by `key` of their compatibility inputs, in order of first appearance: a fleet of
 * 1000 engines has a handful of kinds, and comparing kinds instead of every prefill with every decode
 * keeps these rules linear.
 */
function kindsOf(
  engines: EnginePair[],
  inputs: Map<string, Partial<NixlCompatFactors>>,
  key: (p: EnginePair, inputs: Partial<NixlCompatFactors>) => string = inputsKey,
): Map<string, Kind> {
  const kinds = new Map<string, Kind>();
  for (const p of engines) {
    const own = inputs.get(p.name)!;
    const k = key(p, own);
    const kind = kinds.get(k);
    if (kind) kind.members.push(p);
    else kinds.set(k, { inputs: own, members: [p] });
  }
  return kinds;
}

/** What vLLM's handshake of decode `d` with prefill `pf` refuses besides the hash: the TP ratio, the block size. */
function handshakeIssues(pf: EnginePair, d: EnginePair): ValidationIssue[] {
  const [ptp, dtp] = [pf.record.tensor_parallel_size, d.record.tensor_parallel_size];
  const issues: ValidationIssue[] = [];
  const refusal = tpRatioRefusal(ptp, dtp);
  if (refusal !== null)
    issues.push(
      launchIssue(
        "pd-handshake-tp",
        d.name,
        ["tensor_parallel_size"],
        `${pf.name} (prefill, TP ${ptp}) and ${d.name} (decode, TP ${dtp}) agree on every NIXL compatibility input, but ${refusal}, so KV can never move between them; give the decode a TP that is a multiple of ${ptp} (fleet.json hardware.roles.decode.tensor_parallel_size, and as many gpu_ids), or the prefill a TP that divides ${dtp}`,
      ),
    );
  const [pbs, dbs] = [pf.record.runtime.block_size, d.record.runtime.block_size];
  if (pbs !== dbs)
    issues.push(
      launchIssue(
        "pd-handshake-tp",
        d.name,
        ["runtime", "block_size"],
        `${pf.name} (prefill, block size ${pbs}) and ${d.name} (decode, block size ${dbs}) agree on every NIXL compatibility input, but vLLM's NIXL handshake refuses a remote prefill of another block size ("Remote P worker with different block size is not supported"); give both the same runtime.block_size`,
      ),
    );
  return issues;
}
