import { describe, expect, it } from "vitest";
import { substitute } from "../../src/desired/substitute.js";

const vars = { HOST: "10.0.0.1", PORT: "8000" };

describe("substitute (complete values)", () => {
  it("replaces a string that is exactly ${NAME}, anywhere in the tree", () => {
    const r = substitute({ a: "${HOST}", b: ["${PORT}", "plain"], c: { d: 1, e: "$HOST" } }, vars, { file: "f.json" });
    expect(r.issues).toEqual([]);
    expect(r.value).toEqual({ a: "10.0.0.1", b: ["8000", "plain"], c: { d: 1, e: "$HOST" } });
  });

  it("rejects ${...} embedded in other text, explaining complete-value rules", () => {
    const r = substitute({ url: "http://${HOST}:${PORT}" }, vars, { file: "fleet.json" });
    expect(r.issues).toEqual([expect.objectContaining({ file: "fleet.json", path: "$.url", rule: "substitution" })]);
    expect(r.issues[0]?.message).toMatch(/complete values only/);
  });

  it("names an undefined variable and its JSON path, with the derivation reason", () => {
    const r = substitute({ engines: [{ url: "${NARWHAL_NODE_1_URL}" }] }, vars, {
      file: "fleet.json",
      explainUndefined: (n) => (n === "NARWHAL_NODE_1_URL" ? "NARWHAL_NODE_1_IP is not set" : undefined),
    });
    expect(r.issues).toEqual([expect.objectContaining({ path: "$.engines[0].url", rule: "substitution" })]);
    expect(r.issues[0]?.message).toMatch(/NARWHAL_NODE_1_URL is not defined.*NARWHAL_NODE_1_IP is not set/);
    expect(r.failedPaths.has("$.engines[0].url")).toBe(true);
  });

  it("never copies a secret into a record", () => {
    const r = substitute(
      { env: { K: "${NARWHAL_ENGINE_API_KEY}" } },
      { NARWHAL_ENGINE_API_KEY: "s3cret" },
      {
        file: "engine-launch.json",
        secretNames: new Set(["NARWHAL_ENGINE_API_KEY"]),
      },
    );
    expect(r.issues[0]).toMatchObject({ path: "$.env.K", rule: "secret-reference" });
    expect(JSON.stringify(r)).not.toContain("s3cret");
  });

  it("does not find prototype members as variables", () => {
    const r = substitute("${constructor}", Object.create(null) as Record<string, string>, { file: "x" });
    expect(r.issues).toHaveLength(1);
  });
});
