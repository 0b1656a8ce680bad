// The suggestion helper behind "did you mean": close names only, never a guess between two.
import { describe, expect, it } from "vitest";
import { closestName, editDistance } from "../../src/desired/did-you-mean.js";

describe("editDistance", () => {
  it.each([
    ["gpu_ids", "gpu_ids", 0],
    ["gpu_id", "gpu_ids", 1],
    ["gpsu", "gpus", 1],
    ["NARWAHL", "NARWHAL", 1],
    ["", "abc", 3],
    ["kitten", "sitting", 3],
  ])("%s → %s is %i", (a, b, d) => expect(editDistance(a, b)).toBe(d));
});

describe("closestName", () => {
  const fields = ["gpu_ids", "gpu_visibility_env", "tensor_parallel_size", "extra_args", "role"];
  it("suggests the one close name", () => {
    expect(closestName("gpu_id", fields)).toBe("gpu_ids");
    expect(closestName("tensor_paralel_size", fields)).toBe("tensor_parallel_size");
    expect(closestName("Extra_Args", fields)).toBe("extra_args");
    expect(closestName("NARWHAL_READY_SECOND", ["NARWHAL_READY_SECONDS", "NARWHAL_MODEL_DIR"])).toBe(
      "NARWHAL_READY_SECONDS",
    );
  });
  it("suggests nothing when no name is close, the word is known, or two names are equally close", () => {
    expect(closestName("gpus", fields)).toBeUndefined();
    expect(closestName("rol", ["role", "roe"])).toBeUndefined();
    expect(closestName("NARWHAL_MODEL_TAG", ["NARWHAL_MODEL_DIR"])).toBeUndefined();
    expect(closestName("role", fields)).toBeUndefined();
  });
});
