// Hardware per role (issue 12 item 3, seed 000 "For each replica, set hardware.accelerators_per_engine
// to the number of gpu_ids, set hardware.tensor_parallel to tensor_parallel_size"): a P/D fleet with
// prefill TP 2 and decode TP 4 validates, and each engine keeps its own TP shape in its spec.
import { describe, expect, it } from "vitest";
import { loadDesired, validateDesired } from "../../src/desired/load.js";
import { groupSignature } from "../../src/desired/hash.js";
import { validTree, writeTree, type Obj } from "./fixtures.js";
import { mixedTp } from "../desired-corpus/corpus-hardware.js";

describe("hardware per role", () => {
  it("a prefill TP 2 beside a decode TP 4 validates, each engine with its own shape", async () => {
    const state = await loadDesired(await writeTree(mixedTp(validTree())));
    expect(state.specs.map((s) => [s.role, s.launch.tensor_parallel_size, s.launch.gpu_ids.length])).toEqual([
      ["prefill", 2, 2],
      ["decode", 4, 4],
    ]);
    expect(state.specs.map((s) => s.launch.vllm_args)).toEqual([
      ["--tensor-parallel-size", "2"],
      ["--tensor-parallel-size", "4"],
    ]);
    expect(state.hardware.roles?.["decode"]).toEqual({ accelerators_per_engine: 4, tensor_parallel: 4 });
    // seed 000's group signature includes tensor_parallel_size: mixed TP is two cache-equivalence groups.
    const [p, d] = state.specs.map((s) =>
      // groupSignature picks its seven inputs; the launch record carries four of them.
      groupSignature({ ...s.launch, image_id: "sha256:1", model_config_sha256: "m", transport: "ucx_tcp" }),
    );
    expect(p).not.toBe(d);
  });

  it("a role may override one field and take the other from the fleet-wide default", async () => {
    const t = mixedTp(validTree());
    const hw = t.fleet["hardware"] as Obj;
    hw["accelerators_per_engine"] = 2;
    hw["tensor_parallel"] = 2;
    hw["roles"] = { decode: { accelerators_per_engine: 4, tensor_parallel: 4 } };
    expect((await validateDesired(await writeTree(t))).issues).toEqual([]);
  });

  it("the fleet-wide shape alone still means what it did: every engine has it", async () => {
    const t = mixedTp(validTree());
    t.fleet["hardware"] = { accelerator: "NVIDIA H100 80GB HBM3", accelerators_per_engine: 2, tensor_parallel: 2 };
    const issues = (await validateDesired(await writeTree(t))).issues;
    expect(issues.map((i) => [i.path, i.message])).toEqual([
      [
        "$.hardware.accelerators_per_engine",
        "is 2 but engine-2 selects 4 GPU(s); set it to the number of gpu_ids (seed 000)",
      ],
      [
        "$.hardware.tensor_parallel",
        "is 2 but engine-2 has tensor_parallel_size 4; set it to tensor_parallel_size (seed 000)",
      ],
    ]);
  });
});
