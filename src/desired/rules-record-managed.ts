// Rules that keep a launch record off what the launcher writes itself (seed
// 003 §16): managed flags in extra_args, managed environment, and derived
// fields that disagree with what preparation derives.

import type { ValidationIssue } from "../errors.js";
import { derivedLaunchFields, LAUNCHER_MANAGED_ENV, managedFlagOf } from "./launcher-managed.js";
import { eachRecord, launchIssue, type RecordRule } from "./rule-context.js";

export const managedRules: RecordRule[] = [
  {
    name: "extra-args-managed",
    needs: "launch",
    check: ({ launch }) =>
      eachRecord(launch, (name, r) =>
        r.runtime.extra_args.flatMap((arg, i) => {
          const managed = managedFlagOf(arg);
          if (!managed) return [];
          const { flag, how } = managed;
          const fix =
            "remove it from runtime.extra_args (change the launch record field or deployment variable instead)";
          const message =
            how === "config"
              ? `${name}: --config loads vLLM arguments from a file narwhal cannot check against the launcher-managed flags; write them in runtime.extra_args instead`
              : how === "abbreviation"
                ? `${name}: ${JSON.stringify(arg)} abbreviates ${flag} (vLLM's parser expands unambiguous prefixes), which is set by the launcher; ${fix}`
                : how === "dotted"
                  ? `${name}: ${JSON.stringify(arg)} sets part of ${flag}, which is set by the launcher; ${fix}`
                  : `${name}: ${flag} is set by the launcher; ${fix}`;
          return [launchIssue("extra-args-managed", name, ["runtime", "extra_args", i], message)];
        }),
      ),
  },
  {
    name: "runtime-env-managed",
    needs: "launch",
    check: ({ launch }) =>
      eachRecord(launch, (name, r) =>
        Object.keys(r.runtime.environment).flatMap((key) =>
          LAUNCHER_MANAGED_ENV.has(key)
            ? [
                launchIssue(
                  "runtime-env-managed",
                  name,
                  ["runtime", "environment", key],
                  `${name}: ${key} is set by the launcher from gpu_ids, transfer and node variables; remove it from runtime.environment`,
                ),
              ]
            : [],
        ),
      ),
  },
  {
    name: "derived-fields-agree",
    needs: "launch",
    check: ({ launch }) =>
      eachRecord(launch, (name, r) => {
        const want = derivedLaunchFields(r);
        const out: ValidationIssue[] = [];
        if (r.environment !== undefined && canonical(r.environment) !== canonical(want.environment)) {
          out.push(
            launchIssue(
              "derived-fields-agree",
              name,
              ["environment"],
              `${name}: environment is derived and must be ${JSON.stringify(want.environment)}; remove it or correct gpu_ids/net_devices`,
            ),
          );
        }
        if (r.vllm_args !== undefined && JSON.stringify(r.vllm_args) !== JSON.stringify(want.vllm_args)) {
          out.push(
            launchIssue(
              "derived-fields-agree",
              name,
              ["vllm_args"],
              `${name}: vllm_args is derived and must be ${JSON.stringify(want.vllm_args)}; remove it or correct tensor_parallel_size`,
            ),
          );
        }
        return out;
      }),
  },
];

function canonical(o: Record<string, string>): string {
  return JSON.stringify(
    Object.keys(o)
      .sort()
      .map((k) => [k, o[k]]),
  );
}
