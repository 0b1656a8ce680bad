// Rules about one launch record's GPUs and devices (seed 003 §15): its GPU
// selection against tensor parallelism and fleet.json hardware, and the device
// nodes its accelerator and transfer need. Each returns every issue it finds.

import type { ValidationIssue } from "../errors.js";
import { eachRecord, FLEET_FILE, launchIssue, type RecordRule } from "./rule-context.js";

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
    check: ({ launch, fleet }) =>
      eachRecord(launch, (name, r) => {
        const hw = fleet.hardware;
        const out: ValidationIssue[] = [];
        if (!hw) return out; // hardware failed its schema; reported there
        if (hw.accelerators_per_engine !== r.gpu_ids.length) {
          out.push({
            file: FLEET_FILE,
            path: "$.hardware.accelerators_per_engine",
            rule: "hardware-matches-allocation",
            message: `is ${hw.accelerators_per_engine} but ${name} selects ${r.gpu_ids.length} GPU(s); set it to the number of gpu_ids (seed 000)`,
          });
        }
        if (hw.tensor_parallel !== r.tensor_parallel_size) {
          out.push({
            file: FLEET_FILE,
            path: "$.hardware.tensor_parallel",
            rule: "hardware-matches-allocation",
            message: `is ${hw.tensor_parallel} but ${name} has tensor_parallel_size ${r.tensor_parallel_size}; set it to tensor_parallel_size (seed 000)`,
          });
        }
        return out;
      }),
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
