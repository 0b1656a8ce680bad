// Rules for the launch inputs of seed 001 that go beyond a single record's
// fields: role-environment additions (NARWHAL_ENGINE_ARGS / NARWHAL_ENGINE_ENV),
// a GGUF checkpoint (NARWHAL_MODEL_PATH) and engines sharing one GPU
// (shared_device). Each returns every issue it finds.
import path from "node:path";
import type { ValidationIssue } from "../errors.js";
import { ENGINE_ARGS_VARIABLE, ENGINE_ENV_VARIABLE, parseEngineArgs, parseEngineEnv } from "./launch-extras.js";
import { flagName, LAUNCHER_MANAGED_ENV, managedFlagOf } from "./launcher-managed.js";
import { remoteCodeSpellingProblem } from "./remote-code.js";
import { launchIssue, type RecordRule } from "./rule-context.js";
import { ENV_FILE } from "./rules-variables.js";
import type { ParsedLaunchRecord } from "./schemas.js";

const GGUF_PLUGIN = "vllm-gguf-plugin";

const envIssue = (rule: string, name: string, message: string): ValidationIssue => ({
  file: ENV_FILE,
  path: `$.${name}`,
  message,
  rule,
});

/** The serving arguments a record ends up with: its extra_args plus NARWHAL_ENGINE_ARGS. */
function servingArgs(r: ParsedLaunchRecord, vars: Readonly<Record<string, string>>): string[] {
  const added = parseEngineArgs(vars[ENGINE_ARGS_VARIABLE]);
  return [...r.runtime.extra_args, ...("value" in added ? added.value : [])];
}

/** The value argparse resolves for `flag` (the last occurrence wins; `--a_b` spells `--a-b`). */
export function flagValue(args: readonly string[], flag: string): string | undefined {
  let value: string | undefined;
  args.forEach((arg, i) => {
    if (flagName(arg) !== flag) return;
    value = arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : args[i + 1];
  });
  return value;
}

export const launchExtraRules: RecordRule[] = [
  {
    name: "engine-args-env",
    needs: "launch",
    check: ({ vars }) => {
      const out: ValidationIssue[] = [];
      const args = parseEngineArgs(vars[ENGINE_ARGS_VARIABLE]);
      if ("error" in args)
        out.push(
          envIssue(
            "engine-args-env",
            ENGINE_ARGS_VARIABLE,
            `${ENGINE_ARGS_VARIABLE} ${args.error}; write a JSON array of strings or whitespace-separated arguments`,
          ),
        );
      else {
        for (const arg of args.value) {
          const managed = managedFlagOf(arg);
          if (managed) {
            out.push(
              envIssue(
                "engine-args-env",
                ENGINE_ARGS_VARIABLE,
                `${ENGINE_ARGS_VARIABLE} sets ${managed.flag}, which the launcher manages; remove it (change the launch record field or deployment variable instead)`,
              ),
            );
          }
        }
      }
      const env = parseEngineEnv(vars[ENGINE_ENV_VARIABLE]);
      if ("error" in env)
        out.push(
          envIssue(
            "engine-args-env",
            ENGINE_ENV_VARIABLE,
            `${ENGINE_ENV_VARIABLE}: ${env.error}; write a JSON object of strings or whitespace-separated KEY=VALUE words`,
          ),
        );
      else {
        for (const key of Object.keys(env.value).filter((k) => LAUNCHER_MANAGED_ENV.has(k))) {
          out.push(
            envIssue(
              "engine-args-env",
              ENGINE_ENV_VARIABLE,
              `${ENGINE_ENV_VARIABLE} sets ${key}, which the launcher derives from gpu_ids, transfer and node variables; remove it`,
            ),
          );
        }
      }
      return out;
    },
  },
  {
    name: "remote-code-opt-in",
    needs: "launch",
    // The opt-in must read the same to narwhal, the runtime check and vLLM's parser (remote-code.ts).
    check: ({ vars, launch }) =>
      Object.entries(launch.engines).flatMap(([name, r]) =>
        servingArgs(r, vars).flatMap((arg) => {
          const problem = remoteCodeSpellingProblem(arg);
          return problem
            ? [launchIssue("remote-code-opt-in", name, ["runtime", "extra_args"], `${name}: ${problem}`)]
            : [];
        }),
      ),
  },
  {
    name: "gguf-model",
    needs: "launch",
    check: ({ vars, launch }) => {
      const file = vars["NARWHAL_MODEL_PATH"];
      if (file === undefined || file === "") return [];
      const out: ValidationIssue[] = [];
      const dir = vars["NARWHAL_MODEL_DIR"] ?? "";
      const rel = path.relative(dir, file);
      if (dir === "" || rel === "" || rel.startsWith("..") || path.isAbsolute(rel)) {
        out.push(
          envIssue(
            "gguf-model",
            "NARWHAL_MODEL_PATH",
            `NARWHAL_MODEL_PATH=${file} is not inside NARWHAL_MODEL_DIR=${dir}; keep the GGUF file inside its snapshot directory so the loader can find companion files`,
          ),
        );
      }
      for (const [name, r] of Object.entries(launch.engines)) {
        if (!Object.hasOwn(r.runtime.expected_packages, GGUF_PLUGIN)) {
          out.push(
            launchIssue(
              "gguf-model",
              name,
              ["runtime", "expected_packages"],
              `${name}: a GGUF model (NARWHAL_MODEL_PATH) needs ${GGUF_PLUGIN} pinned in runtime.expected_packages`,
            ),
          );
        }
        const args = servingArgs(r, vars);
        for (const flag of ["--tokenizer", "--hf-config-path"]) {
          if (flagValue(args, flag) === undefined) {
            out.push(
              launchIssue(
                "gguf-model",
                name,
                ["runtime", "extra_args"],
                `${name}: a GGUF model needs the base model's ${flag === "--tokenizer" ? "tokenizer" : "configuration"} through ${flag} PATH in runtime.extra_args`,
              ),
            );
          }
        }
      }
      return out;
    },
  },
  {
    name: "shared-device",
    needs: "launch",
    check: ({ vars, launch }) =>
      Object.entries(launch.engines).flatMap(([name, r]) => {
        if (!r.shared_device) return [];
        const out: ValidationIssue[] = [];
        if (r.gpu_ids.length !== 1) {
          out.push(
            launchIssue(
              "shared-device",
              name,
              ["gpu_ids"],
              `${name}: an engine with shared_device selects exactly one GPU (its TP size is 1), not ${r.gpu_ids.length}`,
            ),
          );
        }
        if (flagValue(servingArgs(r, vars), "--gpu-memory-utilization") !== undefined) {
          out.push(
            launchIssue(
              "shared-device",
              name,
              ["runtime", "extra_args"],
              `${name}: --gpu-memory-utilization is set by the launcher from shared_device.gpu_memory_utilization for an engine with shared_device; remove it from runtime.extra_args and NARWHAL_ENGINE_ARGS`,
            ),
          );
        }
        return out;
      }),
  },
  {
    name: "rocm-dri-per-gpu",
    needs: "launch",
    // rocm-devices asks for /dev/kfd and some DRI device; each selected GPU needs its own render node
    // (mapping /dev/dri whole exposes every GPU of the host, which is allowed but never narrower).
    check: ({ launch }) =>
      Object.entries(launch.engines).flatMap(([name, r]) => {
        if (r.gpu_visibility_env !== "ROCR_VISIBLE_DEVICES" || r.accelerator_devices.includes("/dev/dri")) return [];
        const render = r.accelerator_devices.filter((d) => /^\/dev\/dri\/renderD\d+$/.test(d));
        return render.length >= r.gpu_ids.length
          ? []
          : [
              launchIssue(
                "rocm-dri-per-gpu",
                name,
                ["accelerator_devices"],
                `${name}: ${r.gpu_ids.length} selected GPU(s) but ${render.length} DRI render node(s); map /dev/dri/renderD<n> of every selected GPU`,
              ),
            ];
      }),
  },
  {
    name: "shared-device-consistent",
    needs: "both",
    check: ({ pairs }) => {
      const out: ValidationIssue[] = [];
      const seen = new Map<string, { name: string; allowance: string }>();
      for (const p of pairs) {
        const shared = p.record.shared_device;
        if (!shared || !p.node) continue;
        const key = `${p.node.name}\0${shared.gpu_uuid.toLowerCase()}`;
        const first = seen.get(key);
        if (!first) seen.set(key, { name: p.name, allowance: shared.device_allowance });
        else if (Number(first.allowance) !== Number(shared.device_allowance)) {
          out.push(
            launchIssue(
              "shared-device-consistent",
              p.name,
              ["shared_device", "device_allowance"],
              `${p.name}: device_allowance ${shared.device_allowance} differs from ${first.name}'s ${first.allowance} for the same GPU ${shared.gpu_uuid}; engines sharing a GPU share one allowance`,
            ),
          );
        }
      }
      return out;
    },
  },
];
