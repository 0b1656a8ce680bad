import { describe, expect, it } from "vitest";
import { deriveEndpoints, parseEndpoint } from "../../src/desired/urls.js";

const base = { NARWHAL_ENGINE_PORT: "8000", NARWHAL_ATTEST_PORT: "8010" };

describe("URL derivation (seed 003 §14)", () => {
  it("IPv4", () => {
    const { derived } = deriveEndpoints({ ...base, NARWHAL_NODE_1_IP: "10.0.0.11" }, [1]);
    expect(derived).toEqual({
      NARWHAL_NODE_1_URL: "http://10.0.0.11:8000",
      NARWHAL_NODE_1_ATTESTATION_URL: "http://10.0.0.11:8010/v1/attestation",
    });
  });

  it("IPv6 literals are bracketed and parse back without brackets", () => {
    const { derived } = deriveEndpoints({ ...base, NARWHAL_NODE_3_IP: "fd00::3" }, [3]);
    expect(derived["NARWHAL_NODE_3_URL"]).toBe("http://[fd00::3]:8000");
    expect(derived["NARWHAL_NODE_3_ATTESTATION_URL"]).toBe("http://[fd00::3]:8010/v1/attestation");
    expect(parseEndpoint("http://[fd00::3]:8000")).toEqual({ scheme: "http", host: "fd00::3", port: 8000, path: "/" });
  });

  it("an explicit URL overrides derivation; host and port come from parsing it", () => {
    const vars = { ...base, NARWHAL_NODE_1_IP: "10.0.0.11", NARWHAL_NODE_1_URL: "http://192.168.1.5:9000" };
    const { derived } = deriveEndpoints(vars, [1]);
    expect(derived["NARWHAL_NODE_1_URL"]).toBeUndefined(); // the explicit variable stands
    expect(derived["NARWHAL_NODE_1_ATTESTATION_URL"]).toBe("http://10.0.0.11:8010/v1/attestation");
    expect(parseEndpoint(vars.NARWHAL_NODE_1_URL)).toMatchObject({ host: "192.168.1.5", port: 9000 });
  });

  it("per-node port overrides win over fleet-wide ports", () => {
    const { derived } = deriveEndpoints(
      {
        ...base,
        NARWHAL_NODE_2_IP: "10.0.0.11",
        NARWHAL_NODE_2_ENGINE_PORT: "8001",
        NARWHAL_NODE_2_ATTEST_PORT: "8011",
      },
      [2],
    );
    expect(derived).toEqual({
      NARWHAL_NODE_2_URL: "http://10.0.0.11:8001",
      NARWHAL_NODE_2_ATTESTATION_URL: "http://10.0.0.11:8011/v1/attestation",
    });
  });

  it("explains why a URL cannot be derived", () => {
    const { unavailable } = deriveEndpoints({ NARWHAL_NODE_1_IP: "10.0.0.1", NARWHAL_ENGINE_PORT: "x" }, [1, 2]);
    expect(unavailable.get("NARWHAL_NODE_1_URL")).toMatch(/NARWHAL_ENGINE_PORT="x"/);
    expect(unavailable.get("NARWHAL_NODE_1_ATTESTATION_URL")).toMatch(/NARWHAL_ATTEST_PORT, which is not set/);
    expect(unavailable.get("NARWHAL_NODE_2_URL")).toMatch(/NARWHAL_NODE_2_IP/);
  });

  it("rejects URLs an engine cannot serve at", () => {
    expect(parseEndpoint("10.0.0.1:8000")).toEqual(expect.any(String));
    expect(parseEndpoint("http://u:p@10.0.0.1:8000")).toEqual(expect.stringMatching(/credentials/));
    expect(parseEndpoint("https://e.example")).toMatchObject({ port: 443 });
  });
});
