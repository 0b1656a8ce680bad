// fleet.json's kv_transfer block (issue 11): optional, its documented defaults
// applied when absent or partial, and every bad value named at its path.
import { describe, expect, it } from "vitest";
import { loadDesired } from "../../src/desired/load.js";
import { DEFAULT_KV } from "../../src/desired/kv-policy.js";
import { desiredForPlan } from "../../src/controller/desired-for-plan.js";
import { issuesOf, validTree, writeTree } from "./fixtures.js";

describe("fleet.json kv_transfer block", () => {
  it("is optional: without it every pair is proven, a failed proof restarts its decode once, a prefill restart re-proves", async () => {
    const state = await loadDesired(await writeTree(validTree()));
    expect(state.kv).toEqual({
      prove: true,
      on_failure: "restart_decode",
      on_prefill_restart: "reprove",
      max_decode_restarts: 1,
      watch_interval_s: 30,
    });
    expect(state.kv).toEqual(DEFAULT_KV);
    // The planner gets it as loaded.
    expect(desiredForPlan(state).kv).toEqual(DEFAULT_KV);
  });

  it("takes each field, and fills the ones not given with their defaults", async () => {
    const tree = validTree();
    tree.fleet["kv_transfer"] = { on_failure: "hold", on_prefill_restart: "restart_decodes", watch_interval_s: 0 };
    const state = await loadDesired(await writeTree(tree));
    expect(state.kv).toEqual({
      prove: true,
      on_failure: "hold",
      on_prefill_restart: "restart_decodes",
      max_decode_restarts: 1,
      watch_interval_s: 0,
    });
    tree.fleet["kv_transfer"] = { prove: false, max_decode_restarts: 3 };
    expect((await loadDesired(await writeTree(tree))).kv).toMatchObject({ prove: false, max_decode_restarts: 3 });
  });

  it.each([
    [{ prove: "yes" }, "$.kv_transfer.prove", /boolean/],
    [{ on_failure: "restart" }, "$.kv_transfer.on_failure", /"restart_decode"\|"hold"/],
    [{ on_prefill_restart: "ignore" }, "$.kv_transfer.on_prefill_restart", /"reprove"\|"restart_decodes"/],
    [{ max_decode_restarts: -1 }, "$.kv_transfer.max_decode_restarts", /must be 0 \(never restart\) or more/],
    [{ max_decode_restarts: 1.5 }, "$.kv_transfer.max_decode_restarts", /whole number of restarts/],
    [{ watch_interval_s: -5 }, "$.kv_transfer.watch_interval_s", /must be 0 \(off\) or more seconds/],
    [{ watch_intervall_s: 10 }, "$.kv_transfer.watch_intervall_s", /unknown field/],
  ])("rejects %j at its path", async (block, path, message) => {
    const issues = await issuesOf((t) => {
      t.fleet["kv_transfer"] = block;
    });
    expect(issues).toContainEqual(
      expect.objectContaining({ file: "fleet.json", path, rule: "schema", message: expect.stringMatching(message) }),
    );
  });
});
