// Rules about one launch record at a time (seed 003 §15–16), sometimes
// compared with fleet-level hardware, collected in the order they report:
// devices (rules-record-devices.ts), launcher-managed fields
// (rules-record-managed.ts), then the backend's own inputs below.

import { eachRecord, launchIssue, type RecordRule } from "./rule-context.js";
import { deviceRules } from "./rules-record-devices.js";
import { managedRules } from "./rules-record-managed.js";
import { imageRules } from "./rules-image.js";
import { ENV_FILE } from "./rules-variables.js";

export {
  FLEET_FILE,
  LAUNCH_FILE,
  recPath,
  type FullContext,
  type LaunchContext,
  type RecordRule,
} from "./rule-context.js";
export {
  LAUNCHER_MANAGED_ENV,
  LAUNCHER_MANAGED_FLAGS,
  derivedLaunchFields,
  flagName,
  managedFlagOf,
} from "./launcher-managed.js";

const backendRules: RecordRule[] = [
  {
    name: "container-image",
    needs: "launch",
    check: ({ launch }) =>
      eachRecord(launch, (name, r) =>
        r.backend === "container" && r.image === undefined
          ? [
              launchIssue(
                "container-image",
                name,
                ["image"],
                `${name}: the container backend needs image (an image id or registry digest)`,
              ),
            ]
          : [],
      ),
  },
  {
    name: "native-revision",
    needs: "launch",
    check: ({ launch, vars }) => {
      const natives = Object.entries(launch.engines)
        .filter(([, r]) => r.backend === "native")
        .map(([n]) => n);
      if (natives.length === 0 || (vars["NARWHAL_MODEL_REVISION"] ?? "") !== "") return [];
      return [
        {
          file: ENV_FILE,
          path: "$.NARWHAL_MODEL_REVISION",
          rule: "native-revision",
          message: `${natives.join(", ")} use the native backend, which requires NARWHAL_MODEL_REVISION (seed 001); set it`,
        },
      ];
    },
  },
];

export const recordRules: RecordRule[] = [...deviceRules, ...managedRules, ...backendRules, ...imageRules];
