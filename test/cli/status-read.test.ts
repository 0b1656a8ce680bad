// What `narwhal status` reads beside the state: desired/ now, loaded the way
// the controller loads it, and said once (not thrown) when it cannot be used.
import fs from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { desiredNow } from "../../src/cli/status-read.js";
import { loadDesired } from "../../src/desired/load.js";
import { validTree, writeTree } from "../desired/fixtures.js";

describe("status: desired/ now", () => {
  it("gives each desired engine the input hash the controller would apply", async () => {
    const dir = await writeTree(validTree());
    const now = await desiredNow(dir);
    const specs = (await loadDesired(dir)).specs;
    expect(now).toMatchObject({ dir, valid: true, issues: 0, problem: null });
    expect(now.engines).toEqual(Object.fromEntries(specs.map((s) => [s.name, { input_hash: s.input_hash, backend: s.backend, role: s.role }])));
  });

  it("counts the errors of an invalid desired/ and says to run validate, instead of failing", async () => {
    const dir = await writeTree(validTree(), { fleet: "{ not json" });
    const now = await desiredNow(dir);
    expect(now).toMatchObject({ valid: false, engines: null });
    expect(now.issues).toBeGreaterThan(0);
    expect(now.problem).toBe(`desired state ${dir} is invalid (${now.issues} error${now.issues === 1 ? "" : "s"}): run narwhal validate --desired ${dir}; DESIRED shows ?`);
  });

  it("says a missing desired/ does not exist, once, rather than listing each missing file", async () => {
    const dir = await writeTree(validTree());
    await fs.rm(dir, { recursive: true });
    expect(await desiredNow(dir)).toEqual({
      dir,
      valid: false,
      engines: null,
      issues: 0,
      problem: `desired state ${dir} does not exist (set --desired DIR or NARWHAL_DESIRED); DESIRED shows ?`,
    });
  });
});
