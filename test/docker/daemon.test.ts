// Smoke test for the Docker test engine and the simulator images (test/docker/daemon.ts).
import { describe, expect, inject, it } from "vitest";
import { dockerClient, SIM_VERSION } from "./sim-image.mjs";

/** Payload of a non-TTY container log (8-byte multiplexing headers stripped). */
function demux(buf: Buffer): string {
  let out = "";
  let i = 0;
  while (i + 8 <= buf.length) {
    const len = buf.readUInt32BE(i + 4);
    out += buf.subarray(i + 8, i + 8 + len).toString("utf8");
    i += 8 + len;
  }
  return out;
}

describe("docker test engine", () => {
  const docker = dockerClient(inject("dockerHost"));

  it("answers a ping", async () => {
    expect(inject("dockerHost")).toMatch(/^(unix|tcp|ssh|https?):\/\//);
    const pong = await docker.ping();
    expect(String(pong)).toBe("OK");
  });

  it("has both simulator tags, with different image IDs", async () => {
    const a = await docker.getImage(inject("simImageTag")).inspect();
    const b = await docker.getImage(inject("simImageBTag")).inspect();
    expect(inject("simImageTag")).toMatch(/^narwhal-sim:[0-9a-f]{16}$/);
    expect(inject("simImageBTag")).toMatch(/^narwhal-sim:[0-9a-f]{16}$/);
    expect(inject("simImage")).toBe(a.Id);
    expect(a.Id).toBe(inject("simImageId"));
    expect(b.Id).toBe(inject("simImageBId"));
    expect(a.Id).not.toBe(b.Id);
    expect(a.Config.Env).toContain("PYTHONPATH=/opt/narwhal-sim/site");
  });

  it("runs the simulator's python in a container", async () => {
    const container = await docker.createContainer({
      Image: inject("simImage"),
      Cmd: ["python3", "-c", "import vllm; print(vllm.__version__)"],
      Labels: { "io.narwhal.test": "daemon-smoke" },
      HostConfig: { NetworkMode: "none" },
    });
    try {
      await container.start();
      const result = (await container.wait()) as { StatusCode: number };
      const logs = demux((await container.logs({ stdout: true, stderr: true, follow: false })) as Buffer);
      expect(logs).toContain(SIM_VERSION);
      expect(logs.trim()).toBe("0.11.0");
      expect(result.StatusCode).toBe(0);
    } finally {
      await container.remove({ force: true });
    }
  });
});
