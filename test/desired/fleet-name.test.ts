// fleet.json's `name` (issue 14 item 5): it reaches every spec, and naming a fleet
// leaves every input hash as it was, so an upgrade that adds a name replaces no engine.
import { describe, expect, it } from "vitest";
import { validateDesired } from "../../src/desired/load.js";
import { validTree, writeTree } from "./fixtures.js";

/** The fixture with an absolute model dir, so trees in different temp dirs hash alike. */
function tree() {
  const t = validTree();
  t.env["NARWHAL_MODEL_DIR"] = "/models/m";
  return t;
}

describe("fleet name", () => {
  it("reaches every spec and changes no input hash", async () => {
    const unnamed = await validateDesired(await writeTree(tree()));
    const t = tree();
    t.fleet["name"] = "prod-a";
    const named = await validateDesired(await writeTree(t));
    expect(named.issues).toEqual([]);
    expect(named.state!.specs.map((s) => s.fleet)).toEqual(["prod-a", "prod-a"]);
    expect(unnamed.state!.specs.map((s) => s.fleet)).toEqual([undefined, undefined]);
    expect(named.state!.specs.map((s) => s.input_hash)).toEqual(unnamed.state!.specs.map((s) => s.input_hash));
  });
});
