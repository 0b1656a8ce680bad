// DOCKER_HOST-style endpoints → dockerode options; the ssh:// endpoint is what
// a node reached over ssh defaults to (src/desired/node-host.ts sshDockerHost).
import { describe, expect, it } from "vitest";
import { dockerOptions } from "../../src/backends/docker-endpoint.js";
import { sshDockerHost } from "../../src/desired/node-host.js";

const cfg = { tlsVerify: false };

describe("dockerOptions", () => {
  it.each([
    ["ssh://alice@gpu-b", { protocol: "ssh", host: "gpu-b", port: 22, username: "alice" }],
    ["ssh://gpu-b:2222", { protocol: "ssh", host: "gpu-b", port: "2222", username: undefined }],
    // ssh2 connects to the address itself: the URL's brackets are not part of it.
    ["ssh://narwhal@[fd00::12]:2222", { protocol: "ssh", host: "fd00::12", port: "2222", username: "narwhal" }],
    ["tcp://[fd00::12]:2375", { protocol: "http", host: "fd00::12", port: "2375" }],
  ])("%s", (endpoint, want) => {
    expect(dockerOptions(endpoint, cfg)).toEqual(want);
  });

  it("a node's default ssh endpoint reaches the node's destination and port", () => {
    for (const [destination, port, host] of [
      ["narwhal@fd00::12", 2222, "fd00::12"],
      ["alice@gpu-b", 22, "gpu-b"],
      ["10.20.0.12", 22, "10.20.0.12"],
    ] as const) {
      const opts = dockerOptions(sshDockerHost({ destination, port }), cfg);
      expect(opts).toMatchObject({ protocol: "ssh", host, port: port === 22 ? 22 : String(port) });
    }
  });
});
