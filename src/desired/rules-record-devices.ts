// Rules about one launch record's GPUs and devices (seed 003 §15): its GPU
// selection against tensor parallelism and fleet.json hardware, and the device
// nodes its accelerator and transfer need. Each returns every issue it finds.

import type { ValidationIssue } from "../errors.js";
import { eachRecord, fleetIssue, launchIssue, type RecordRule } from "./rule-context.js";
import type { EngineLaunchFile, Hardware, ParsedLaunchRecord } from "./schemas.js";
import type { FleetForRules } from "./records-for-rules.js";

/** What the fleet expects of one engine's allocation, and where it says so. */
const ALLOCATION = [
  [
    "accelerators_per_engine",
    "the number of gpu_ids",
    (r: ParsedLaunchRecord) => r.gpu_ids.length,
    "selects",
    "GPU(s)",
  ],
  [
    "tensor_parallel",
    "tensor_parallel_size",
    (r: ParsedLaunchRecord) => r.tensor_parallel_size,
    "has tensor_parallel_size",
    "",
  ],
] as const;

/**
 * seed 000: "For each replica, set hardware.accelerators_per_engine to the number of gpu_ids, set
 * hardware.tensor_parallel to tensor_parallel_size". hardware.roles.<role> overrides the fleet-wide
 * value for the engines of that role, so prefill TP 2 beside decode TP 4 validates; each issue names
 * the value at fault (the role's when it sets one, else the fleet-wide one).
 */
function allocationIssues(hw: Hardware, name: string, r: ParsedLaunchRecord): ValidationIssue[] {
  const role = Object.hasOwn(hw.roles ?? {}, r.role) ? hw.roles?.[r.role] : undefined;
  return ALLOCATION.flatMap(([field, what, actual, verb, unit]) => {
    const own = role?.[field];
    const expected = own ?? hw[field];
    const segments = own === undefined ? ["hardware", field] : ["hardware", "roles", r.role, field];
    if (expected === undefined)
      return [
        fleetIssue(
          "hardware-matches-allocation",
          ["hardware", field],
          `is missing, and hardware.roles.${r.role}.${field} is not set for ${name} (role ${r.role}); set either to ${what} (seed 000)`,
        ),
      ];
    if (expected === actual(r)) return [];
    const actualText = `${actual(r)}${unit ? ` ${unit}` : ""}`;
    return [
      fleetIssue(
        "hardware-matches-allocation",
        segments,
        `is ${expected} but ${name} ${verb} ${actualText}; set it to ${what} (seed 000)`,
      ),
    ];
  });
}

/** A hardware.roles entry no engine has: a misspelt role would otherwise silently leave the fleet-wide shape in force. */
function unusedHardwareRoles(hw: Hardware, launch: EngineLaunchFile, fleet: FleetForRules): ValidationIssue[] {
  const used = new Set([
    ...Object.values(launch.engines).map((r) => r.role),
    ...fleet.engines.flatMap((e) => (e ? [e.role] : [])),
  ]);
  return Object.keys(hw.roles ?? {}).flatMap((role) =>
    used.has(role)
      ? []
      : [
          fleetIssue(
            "hardware-matches-allocation",
            ["hardware", "roles", role],
            `no engine has role "${role}" (roles: ${[...used].sort().join(", ")}); name a fleet role or remove it`,
          ),
        ],
  );
}

export const deviceRules: RecordRule[] = [
  {
    name: "tp-equals-gpu-count",
    needs: "launch",
    check: ({ launch }) =>
      eachRecord(launch, (name, r) =>
        r.tensor_parallel_size === r.gpu_ids.length
          ? []
          : [
              launchIssue(
                "tp-equals-gpu-count",
                name,
                ["tensor_parallel_size"],
                `${name}: tensor_parallel_size is ${r.tensor_parallel_size} but gpu_ids selects ${r.gpu_ids.length} GPU(s); they must be equal`,
              ),
            ],
      ),
  },
  {
    name: "gpu-ids-unique",
    needs: "launch",
    check: ({ launch }) =>
      eachRecord(launch, (name, r) =>
        r.gpu_ids.flatMap((id, i) =>
          r.gpu_ids.indexOf(id) === i
            ? []
            : [launchIssue("gpu-ids-unique", name, ["gpu_ids", i], `${name}: GPU "${id}" is selected twice`)],
        ),
      ),
  },
  {
    name: "hardware-matches-allocation",
    needs: "both",
    check: ({ launch, fleet }) => {
      const hw = fleet.hardware;
      if (!hw) return []; // hardware failed its schema; reported there
      return [
        ...unusedHardwareRoles(hw, launch, fleet),
        ...eachRecord(launch, (name, r) => allocationIssues(hw, name, r)),
      ];
    },
  },
  {
    name: "accelerator-matches-hardware",
    needs: "both",
    check: ({ launch, fleet }) =>
      eachRecord(launch, (name, r) =>
        !fleet.hardware || r.accelerator === fleet.hardware.accelerator
          ? []
          : [
              launchIssue(
                "accelerator-matches-hardware",
                name,
                ["accelerator"],
                `${name}: accelerator "${r.accelerator}" differs from fleet.json hardware.accelerator "${fleet.hardware.accelerator}"`,
              ),
            ],
      ),
  },
  {
    name: "rocm-devices",
    needs: "launch",
    check: ({ launch }) =>
      eachRecord(launch, (name, r) => {
        if (r.gpu_visibility_env !== "ROCR_VISIBLE_DEVICES") return [];
        const out: ValidationIssue[] = [];
        if (!r.accelerator_devices.includes("/dev/kfd")) {
          out.push(
            launchIssue(
              "rocm-devices",
              name,
              ["accelerator_devices"],
              `${name}: ROCm engines need /dev/kfd in accelerator_devices`,
            ),
          );
        }
        if (!r.accelerator_devices.some((d) => d.startsWith("/dev/dri/"))) {
          out.push(
            launchIssue(
              "rocm-devices",
              name,
              ["accelerator_devices"],
              `${name}: ROCm engines need the DRI devices of their GPUs (/dev/dri/renderD<n>) in accelerator_devices`,
            ),
          );
        }
        return out;
      }),
  },
  {
    name: "transfer-devices",
    needs: "launch",
    check: ({ launch }) =>
      eachRecord(launch, (name, r) => {
        const { transport, devices } = r.transfer;
        if (transport === "ucx_rdma" && devices.length === 0) {
          return [
            launchIssue(
              "transfer-devices",
              name,
              ["transfer", "devices"],
              `${name}: ucx_rdma needs its RDMA character devices (e.g. /dev/infiniband/uverbs0, /dev/infiniband/rdma_cm)`,
            ),
          ];
        }
        if (transport === "ucx_tcp" && devices.length > 0) {
          return [
            launchIssue(
              "transfer-devices",
              name,
              ["transfer", "devices"],
              `${name}: ucx_tcp uses an empty devices list`,
            ),
          ];
        }
        return [];
      }),
  },
];
