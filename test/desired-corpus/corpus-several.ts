// Corpus trees with several mistakes at once (issue 8 item 16): each must be
// reported, once, and nothing else. Schema errors in some records must hide no
// rule error about the others, and a record that failed its schema is not
// reported again as missing by a rule.
import { fleetEngine, rec, runtime, type Obj } from "../desired/fixtures.js";
import { E, F, L, node0, port1, r1, r2, type CorpusCase } from "./corpus-case.js";

export const SEVERAL_MISTAKES: CorpusCase[] = [
  {
    name: "five mistakes: two schema errors, two rule errors and a misspelt variable",
    category: "several mistakes",
    edit: (t) => {
      rec(t, 1)["gpu_id"] = ["0"];
      delete fleetEngine(t, 1)["role"];
      rec(t, 2)["tensor_parallel_size"] = 2;
      rec(t, 2)["accelerator"] = "NVIDIA A100";
      (t.fleet["hardware"] as Obj)["tensor_parallel"] = 2;
      t.env["NARWHAL_READY_SECOND"] = "600";
    },
    expect: [
      { file: L, path: r1(".gpu_id"), message: /unknown field "gpu_id"; did you mean "gpu_ids"\?/ },
      {
        file: F,
        path: "$.engines[1].role",
        message: /^required field "role" is missing \(a string\): Serving role, e\.g\. prefill or decode/,
      },
      { file: L, path: r2(".tensor_parallel_size"), message: /tensor_parallel_size is 2 but gpu_ids selects 1/ },
      {
        file: L,
        path: r2(".accelerator"),
        message: /accelerator "NVIDIA A100" differs from fleet\.json hardware\.accelerator/,
      },
      { file: E, path: "$.NARWHAL_READY_SECOND", message: /did you mean NARWHAL_READY_SECONDS\?/ },
    ],
  },
  {
    name: "a schema error in one launch record and a rule error in the other",
    category: "several mistakes",
    edit: (t) => {
      rec(t, 1)["tensor_parallel_size"] = "1";
      (runtime(t, 2)["environment"] as Obj)["VLLM_API_KEY"] = "x";
    },
    expect: [
      { file: L, path: r1(".tensor_parallel_size"), message: /expected number/ },
      { file: L, path: r2(".runtime.environment.VLLM_API_KEY"), message: /set by the launcher/ },
    ],
  },
  {
    name: "an unknown top-level field in fleet.json and a duplicate port",
    category: "several mistakes",
    edit: (t) => {
      t.fleet["version"] = 2;
      t.env["NARWHAL_NODE_2_ENGINE_PORT"] = port1(t, "ENGINE_PORT", "NARWHAL_ENGINE_PORT");
    },
    expect: [
      { file: F, path: "$.version", message: /unknown field "version"; remove it/ },
      {
        file: F,
        path: "$.engines[1].url",
        message: /engine-2 HTTP port \d+ on node \S+ is already planned for engine-1 HTTP/,
      },
    ],
  },
  {
    name: "a fleet record without its url and a role mismatch in the other engine",
    category: "several mistakes",
    edit: (t) => {
      delete fleetEngine(t, 0)["url"];
      rec(t, 2)["role"] = "prefill";
    },
    expect: [
      { file: F, path: "$.engines[0].url", message: /^required field "url" is missing \(a string\): Engine HTTP URL/ },
      { file: L, path: r2(".role"), message: /role "prefill" differs from the fleet record n2 role "decode"/ },
    ],
  },
  {
    name: "hardware of the wrong type and a GPU shared by two engines",
    category: "several mistakes",
    edit: (t) => {
      (t.fleet["hardware"] as Obj)["tensor_parallel"] = "1";
      rec(t, 2)["gpu_ids"] = ["0"];
      rec(t, 2)["accelerator_devices"] = ["/dev/nvidia0"];
    },
    expect: [
      { file: F, path: "$.hardware.tensor_parallel", message: /expected number/ },
      { file: L, path: r2(".gpu_ids[0]"), message: /already allocated to engine-1/ },
    ],
  },
  {
    name: "engine-launch.json cut in half and an engine URL with a path",
    category: "several mistakes",
    raw: (t) => ({ launch: JSON.stringify(t.launch, null, 2).slice(0, 300) }),
    edit: (t) => {
      t.env["NARWHAL_NODE_1_URL"] = "http://10.0.0.11:8000/v1";
    },
    expect: [
      { file: L, path: "$", message: /is truncated/ },
      { file: F, path: "$.engines[0].url", message: /must not have a path/ },
    ],
  },
  {
    name: "a node record that fails its schema and a launch record that fails its own",
    category: "several mistakes",
    edit: (t) => {
      node0(t)["name"] = "../gpu-a";
      rec(t, 1)["backend"] = "docker";
    },
    expect: [
      { file: F, path: "$.nodes[0].name", message: /must be a host name/ },
      { file: L, path: r1(".backend"), message: /Invalid option/ },
    ],
  },
];
