// Corpus trees about the TP shape per role (issue 12 item 3): a P/D fleet whose prefill runs
// TP 2 and decode TP 4, declared in hardware.roles, broken one way at a time. mixedTp builds
// the valid tree the cases start from (and test/desired/hardware-roles.test.ts loads).
import { rec, type DesiredTree, type Obj } from "../desired/fixtures.js";
import { F, L, r2, type CorpusCase } from "./corpus-case.js";

const hardware = (t: DesiredTree) => t.fleet["hardware"] as Obj;
const roles = (t: DesiredTree) => hardware(t)["roles"] as Record<string, Obj>;

/** Engine k on `gpus`, with TP and devices to match. */
function allocate(t: DesiredTree, k: number, gpus: string[]): void {
  Object.assign(rec(t, k), {
    gpu_ids: gpus,
    tensor_parallel_size: gpus.length,
    accelerator_devices: gpus.map((g) => `/dev/nvidia${g}`),
  });
}

/** The valid two-engine tree made prefill TP 2 (GPUs 0-1), decode TP 4 (GPUs 2-5), with no fleet-wide shape. */
export function mixedTp(t: DesiredTree): DesiredTree {
  allocate(t, 1, ["0", "1"]);
  allocate(t, 2, ["2", "3", "4", "5"]);
  t.fleet["hardware"] = {
    accelerator: "NVIDIA H100 80GB HBM3",
    roles: {
      prefill: { accelerators_per_engine: 2, tensor_parallel: 2 },
      decode: { accelerators_per_engine: 4, tensor_parallel: 4 },
    },
  };
  return t;
}

export const HARDWARE_CASES: CorpusCase[] = [
  {
    name: "per-role tensor_parallel differs from the role's engines",
    category: "TP mismatch",
    edit: (t) => {
      roles(mixedTp(t))["decode"]!["tensor_parallel"] = 2;
    },
    expect: [
      {
        file: F,
        path: "$.hardware.roles.decode.tensor_parallel",
        message: /^is 2 but engine-2 has tensor_parallel_size 4; set it to tensor_parallel_size \(seed 000\)$/,
      },
    ],
  },
  {
    name: "per-role accelerators_per_engine differs from the role's gpu_ids",
    category: "TP mismatch",
    edit: (t) => {
      roles(mixedTp(t))["prefill"]!["accelerators_per_engine"] = 4;
    },
    expect: [
      {
        file: F,
        path: "$.hardware.roles.prefill.accelerators_per_engine",
        message: /^is 4 but engine-1 selects 2 GPU\(s\); set it to the number of gpu_ids/,
      },
    ],
  },
  {
    name: "a role without its own TP falls back to a fleet-wide one that does not fit",
    category: "TP mismatch",
    edit: (t) => {
      mixedTp(t);
      delete roles(t)["decode"]!["tensor_parallel"];
      hardware(t)["tensor_parallel"] = 2;
    },
    expect: [{ file: F, path: "$.hardware.tensor_parallel", message: /^is 2 but engine-2 has tensor_parallel_size 4/ }],
  },
  {
    name: "neither the role nor the fleet sets accelerators_per_engine",
    category: "TP mismatch",
    edit: (t) => {
      delete roles(mixedTp(t))["decode"]!["accelerators_per_engine"];
    },
    expect: [
      {
        file: F,
        path: "$.hardware.accelerators_per_engine",
        message: /is missing, and hardware\.roles\.decode\.accelerators_per_engine is not set for engine-2/,
      },
    ],
  },
  {
    name: "hardware.roles names a role no engine has",
    category: "hardware",
    edit: (t) => {
      const r = roles(mixedTp(t));
      r["decoder"] = r["decode"]!;
    },
    expect: [
      { file: F, path: "$.hardware.roles.decoder", message: /no engine has role "decoder" \(roles: decode, prefill\)/ },
    ],
  },
  {
    name: "unknown field in a role's hardware",
    category: "unknown field",
    edit: (t) => {
      roles(mixedTp(t))["prefill"]!["gpus"] = 2;
    },
    expect: { file: F, path: "$.hardware.roles.prefill.gpus", message: /unknown field/ },
  },
  {
    name: "a role's tensor_parallel is not a positive integer",
    category: "wrong type",
    edit: (t) => {
      roles(mixedTp(t))["decode"]!["tensor_parallel"] = 0;
    },
    expect: { file: F, path: "$.hardware.roles.decode.tensor_parallel", message: /./ },
  },
  {
    name: "hardware.roles is a list",
    category: "wrong type",
    edit: (t) => {
      hardware(mixedTp(t))["roles"] = [{ prefill: { tensor_parallel: 2 } }];
    },
    expect: { file: F, path: "$.hardware.roles", message: /./ },
  },
  {
    name: "the launch record's TP disagrees with its gpu_ids under per-role hardware",
    category: "TP mismatch",
    edit: (t) => {
      rec(mixedTp(t), 2)["tensor_parallel_size"] = 2;
    },
    expect: { file: L, path: r2(".tensor_parallel_size"), message: /tensor_parallel_size is 2 but gpu_ids selects 4/ },
  },
  {
    // vLLM 0.11's handshake: tp_ratio = divide(decode TP, prefill TP) asserts divisibility.
    name: "a prefill of larger TP than its decode (the NIXL handshake refuses it)",
    category: "TP mismatch",
    edit: (t) => {
      mixedTp(t);
      allocate(t, 1, ["0", "1", "2", "3"]);
      allocate(t, 2, ["4", "5"]);
      roles(t)["prefill"] = { accelerators_per_engine: 4, tensor_parallel: 4 };
      roles(t)["decode"] = { accelerators_per_engine: 2, tensor_parallel: 2 };
    },
    expect: [
      {
        file: L,
        path: r2(".tensor_parallel_size"),
        message:
          /^engine-1 \(prefill, TP 4\) and engine-2 \(decode, TP 2\) agree on every NIXL compatibility input, but vLLM's NIXL handshake refuses a decode of smaller TP than its prefill .*give the decode a TP that is a multiple of 4 .*or the prefill a TP that divides 2$/,
      },
    ],
  },
  {
    name: "a decode TP that is not a multiple of its prefill's",
    category: "TP mismatch",
    edit: (t) => {
      mixedTp(t);
      allocate(t, 2, ["2", "3", "4"]);
      roles(t)["decode"] = { accelerators_per_engine: 3, tensor_parallel: 3 };
    },
    expect: [
      {
        file: L,
        path: r2(".tensor_parallel_size"),
        message:
          /engine-1 \(prefill, TP 2\) and engine-2 \(decode, TP 3\) .*needs the decode's TP to be a multiple of the prefill's/,
      },
    ],
  },
  {
    name: "a prefill and decode of different KV block sizes (the NIXL handshake refuses it)",
    category: "TP mismatch",
    edit: (t) => {
      (rec(mixedTp(t), 2)["runtime"] as Obj)["block_size"] = 32;
    },
    expect: [
      {
        file: L,
        path: r2(".runtime.block_size"),
        message:
          /engine-1 \(prefill, block size 16\) and engine-2 \(decode, block size 32\) .*give both the same runtime\.block_size$/,
      },
    ],
  },
];
