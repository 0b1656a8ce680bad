// Seed 000 names the engine image by identity: an image id or a registry digest validates, a tag
// (mutable: two hosts may resolve it to two images) is the image-identity error, with the file and
// JSON path of the record and the engines and nodes the CLI resolves it on.
import { describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import type { ValidationIssue } from "../../src/errors.js";
import { parseImageRef, repositoryOf } from "../../src/desired/image-ref.js";
import { validateDesired } from "../../src/desired/load.js";
import { issuesOf, rec, validTree, writeTree } from "./fixtures.js";

const HEX = "0123456789abcdef".repeat(4);
const only = (issues: ValidationIssue[]) => issues.filter((i) => i.rule === "image-identity");

describe("image references", () => {
  it.each([
    [`sha256:${HEX}`, { kind: "id", id: `sha256:${HEX}` }],
    [`vllm/vllm-openai@sha256:${HEX}`, { kind: "digest", name: "vllm/vllm-openai", digest: `sha256:${HEX}` }],
    [
      `registry.local:5000/vllm:0.11.0@sha256:${HEX}`,
      { kind: "digest", name: "registry.local:5000/vllm:0.11.0", digest: `sha256:${HEX}` },
    ],
    ["vllm/vllm-openai:latest", { kind: "tag" }],
    ["narwhal-sim:abc", { kind: "tag" }],
    [HEX, { kind: "tag" }], // bare hex: docker image inspect prints sha256:, the seed compares that
    [`sha256:${HEX.toUpperCase()}`, { kind: "tag" }],
    [`@sha256:${HEX}`, { kind: "tag" }],
  ])("%s", (ref, want) => {
    expect(parseImageRef(ref)).toEqual(want);
  });

  it("a digest's repository drops the tag, not a registry port", () => {
    expect(repositoryOf("registry.local:5000/vllm:0.11.0")).toBe("registry.local:5000/vllm");
    expect(repositoryOf("registry.local:5000/vllm")).toBe("registry.local:5000/vllm");
    expect(repositoryOf("vllm")).toBe("vllm");
  });
});

describe("image-identity", () => {
  it("accepts an image id and a registry digest", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 1)["image"] = `sha256:${HEX}`;
      rec(t, 2)["image"] = `vllm/vllm-openai:v0.11.0@sha256:${HEX}`;
    });
    expect(only(issues)).toEqual([]);
  });

  it("rejects a tag and a malformed id, each at its record's image", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 1)["image"] = "vllm/vllm-openai:latest";
      rec(t, 2)["image"] = `sha256:${HEX}0`;
    });
    expect(only(issues)).toEqual([
      {
        file: "engine-launch.json",
        path: '$.engines["engine-1"].image',
        rule: "image-identity",
        message: expect.stringContaining('engine-1: image "vllm/vllm-openai:latest" is a tag') as string,
      },
      {
        file: "engine-launch.json",
        path: '$.engines["engine-2"].image',
        rule: "image-identity",
        message: expect.stringContaining("is not an image id (sha256: then 64 lowercase hex digits)") as string,
      },
    ]);
  });

  it("a native record's image is not judged", async () => {
    const issues = await issuesOf((t) => {
      rec(t, 1)["backend"] = "native";
      rec(t, 1)["image"] = "vllm/vllm-openai:latest";
    });
    expect(only(issues)).toEqual([]);
  });

  it("lists each tagged engine with its node and the variable its image comes from", async () => {
    const t = validTree();
    rec(t, 1)["image"] = "${NARWHAL_ENGINE_IMAGE}";
    t.env["NARWHAL_ENGINE_IMAGE"] = "narwhal-sim:latest";
    rec(t, 2)["image"] = "narwhal-sim:b";
    const dir = await writeTree(t);
    try {
      const result = await validateDesired(dir);
      expect(result.state).toBeUndefined();
      expect(
        result.imageTags?.map((x) => ({
          engine: x.engine,
          image: x.image,
          variable: x.variable,
          nodes: x.nodes.map((n) => n.name),
        })),
      ).toEqual([
        { engine: "engine-1", image: "narwhal-sim:latest", variable: "NARWHAL_ENGINE_IMAGE", nodes: ["gpu-a"] },
        { engine: "engine-2", image: "narwhal-sim:b", variable: undefined, nodes: ["gpu-a"] },
      ]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});
