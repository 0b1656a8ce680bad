// P/D across tensor-parallel sizes (issue 12 item 3) through the real CLI and the
// native simulator: a TP-1 prefill and a TP-2 decode are two cache-equivalence
// groups (TP is in seed 000's signature) but one pairing class (vLLM leaves TP
// out of the NIXL hash), so they pair, the KV proof passes across the TP ratio,
// and `reconcile --once` exits 0. (The host fixture has two GPUs per node, so the
// decode's TP is 2, not 4: the ratio the handshake judges is the same kind.)
import { afterAll, describe, expect, it } from "vitest";
import { simFleet } from "./sim-fleet.js";
import { kvOf, runCli, teardown } from "./cli.js";
import { readState } from "../../src/state/store.js";
import { readServingFleet } from "../../src/controller/serving-file.js";

const stateDirs: string[] = [];
afterAll(async () => {
  for (const dir of stateDirs) await teardown(dir);
});

describe("a prefill and a decode of different TP", () => {
  it("pair across their groups, pass the KV proof, and --once exits 0", async () => {
    // engine-1 prefill (GPU 0) and engine-2 prefill (GPU 1) on node local; engine-3 decode (GPUs 0,1) on local-2.
    const fleet = await simFleet({
      engines: [
        { role: "prefill", gpus: ["0"] },
        { role: "prefill", gpus: ["1"] },
        { role: "decode", gpus: ["0", "1"] },
      ],
    });
    stateDirs.push(fleet.stateDir);
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const state = await readState(fleet.stateDir);
    const groups = ["engine-1", "engine-3"].map((e) => state.engines[e]!.group_signature);
    expect(groups[0]).not.toBe(groups[1]);
    expect(state.engines["engine-3"]!.layout?.tensor_parallel_size).toBe(2);
    for (const name of ["engine-1", "engine-2", "engine-3"])
      expect(kvOf(state.engines[name]!), name).toMatchObject({ status: "True", reason: "Proven" });
    expect(state.proofs?.["engine-1>engine-3"]).toMatchObject({ passed: true, source: "proof" });
    const serving = await readServingFleet(fleet.stateDir);
    expect(serving?.pairs).toEqual([
      { prefill: "engine-1", decode: "engine-3" },
      { prefill: "engine-2", decode: "engine-3" },
    ]);
    // Each engine keeps its own group; no single group spans the class.
    expect(serving?.group_signature).toBeNull();
    expect(serving?.pairing_class).toMatch(/^nixl [0-9a-f]{64} tree [0-9a-f]{64}$/);
    expect(serving?.engines.map((e) => e.group_signature)).toEqual([groups[0], groups[0], groups[1]]);
  });
});
