// desiredForPlan and plan() over a desired tree loaded from files: the
// planner sees hashed inputs and fleet records, never a secret, and an edit of
// deployment.env is named as the field it reaches.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { desiredForPlan } from "../../src/controller/desired-for-plan.js";
import { plan } from "../../src/controller/planner.js";
import { inputHash } from "../../src/desired/hash.js";
import { loadDesired } from "../../src/desired/load.js";
import { envText, validTree, writeTree } from "../desired/fixtures.js";
import { captured, observedOf, RUNNING } from "./plan-fixtures.js";

describe("desiredForPlan", () => {
  it("lists every engine with its fleet record, input hash and hashed inputs, and the rollout policy", async () => {
    const tree = validTree();
    tree.fleet["rollout"] = { max_unavailable: { decode: "50%" } };
    const state = await loadDesired(await writeTree(tree));
    const d = desiredForPlan(state);
    expect(d.rollout).toEqual({
      max_unavailable: { decode: "50%" },
      default_max_unavailable: 1,
      incompatible: "pd_units",
    });
    expect(d.engines.map((e) => [e.engine, e.role, e.iid, e.url])).toEqual([
      ["engine-1", "prefill", "n1", "http://10.0.0.11:8000"],
      ["engine-2", "decode", "n2", "http://10.0.0.11:8001"],
    ]);
    for (const [i, e] of d.engines.entries()) expect(e.input_hash).toBe(inputHash(state.specs[i]!));
  });

  it("never carries the API key in clear", async () => {
    const d = desiredForPlan(await loadDesired(await writeTree(validTree())));
    expect(JSON.stringify(d)).not.toContain("k-123");
    expect(d.engines[0]!.inputs["api_key_sha256"]).toMatch(/^[0-9a-f]{64}$/);
  });

  it("a deployment variable edit is planned as a replace naming the field it reaches", async () => {
    const tree = validTree();
    const dir = await writeTree(tree);
    const before = desiredForPlan(await loadDesired(dir));
    tree.env["NARWHAL_MODEL_REVISION"] = "r2";
    await writeFile(join(dir, "deployment.env"), envText(tree.env));
    const after = desiredForPlan(await loadDesired(dir));
    const p = plan(after, observedOf(before.engines.map((e) => captured(e))), RUNNING);
    const replaces = p.actions.filter((a) => a.kind === "replace");
    // 1P+1D and a group field: the one P/D unit moves together.
    expect(replaces.map((a) => a.engine)).toEqual(["engine-1", "engine-2"]);
    expect(replaces[0]).toMatchObject({
      group_changes: true,
      fields: [{ path: "model.revision", old: "r1", new: "r2", group: true }],
    });
    expect(replaces[0]!.reason).toContain(
      'model.revision (deployment.env NARWHAL_MODEL_REVISION) ("r1" → "r2"); changes the group signature',
    );
  });
});
