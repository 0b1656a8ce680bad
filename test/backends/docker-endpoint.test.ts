// DOCKER_HOST-style endpoints → dockerode options; the ssh:// endpoint is what
// a node reached over ssh defaults to (src/desired/node-host.ts sshDockerHost),
// dialled by the agent it is given (OpenSSH, src/backends/docker-ssh.ts), never ssh2.
import http from "node:http";
import { describe, expect, it } from "vitest";
import { dockerOptions } from "../../src/backends/docker-endpoint.js";
import { sshDockerHost } from "../../src/desired/node-host.js";

const cfg = { tlsVerify: false };
const agent = new http.Agent();
const dialled: string[] = [];
const sshAgent = (endpoint: string) => {
  dialled.push(endpoint);
  return agent;
};

describe("dockerOptions", () => {
  it.each([
    ["ssh://alice@gpu-b", { protocol: "http", host: "gpu-b", port: 22, agent }],
    ["ssh://gpu-b:2222", { protocol: "http", host: "gpu-b", port: "2222", agent }],
    // The host only labels the requests (the agent dials the node): no URL brackets in it.
    ["ssh://narwhal@[fd00::12]:2222", { protocol: "http", host: "fd00::12", port: "2222", agent }],
    ["tcp://[fd00::12]:2375", { protocol: "http", host: "fd00::12", port: "2375" }],
  ])("%s", (endpoint, want) => {
    expect(dockerOptions(endpoint, cfg, sshAgent)).toEqual(want);
  });

  it("a ssh:// endpoint is dialled by the agent made for it, and needs one", () => {
    dialled.length = 0;
    dockerOptions("ssh://alice@gpu-b", cfg, sshAgent);
    expect(dialled).toEqual(["ssh://alice@gpu-b"]);
    expect(() => dockerOptions("ssh://alice@gpu-b", cfg)).toThrow(/needs an agent/);
  });

  it("a node's default ssh endpoint reaches the node's destination and port", () => {
    for (const [destination, port, host] of [
      ["narwhal@fd00::12", 2222, "fd00::12"],
      ["alice@gpu-b", 22, "gpu-b"],
      ["10.20.0.12", 22, "10.20.0.12"],
    ] as const) {
      const opts = dockerOptions(sshDockerHost({ destination, port }), cfg, sshAgent);
      expect(opts).toMatchObject({ protocol: "http", host, port: port === 22 ? 22 : String(port), agent });
    }
  });
});
