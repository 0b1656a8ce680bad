// The before-launch image comparison (seed 000): for an id, the node's image Id is it; for a
// registry digest, one of its RepoDigests is it; once planned, the image is the plan's. A mismatch
// is terminal, a missing image outwaited; every error names engine, node, NARWHAL_ENGINE_IMAGE and
// the fix. The Docker client here is a fixture that answers image inspections from a table.
import { describe, expect, it } from "vitest";
import type Docker from "dockerode";
import { imageByIdentity, IMAGE_INPUT } from "../../src/backends/container-image.js";
import type { DockerCalls } from "../../src/backends/docker-calls.js";
import { PhaseError } from "../../src/errors.js";

const A = `sha256:${"a".repeat(64)}`;
const B = `sha256:${"b".repeat(64)}`;
const D = `sha256:${"d".repeat(64)}`;

/** A node whose daemon resolves each reference in `images` to that image. */
function node(images: Record<string, Partial<Docker.ImageInspectInfo>>): DockerCalls {
  return {
    endpoint: "unix:///run/gpu-a.sock",
    inspectImage: (ref: string) => Promise.resolve((images[ref] as Docker.ImageInspectInfo | undefined) ?? null),
  } as unknown as DockerCalls;
}

const check = (ref: string, planned?: string) => ({
  engine: "engine-1",
  step: "start" as const,
  node: "gpu-a",
  ref,
  ...(planned ? { planned } : {}),
});

async function failure(p: Promise<unknown>): Promise<PhaseError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PhaseError);
  return err as PhaseError;
}

describe("imageByIdentity", () => {
  it("an id the node holds, and a digest among its RepoDigests, pass", async () => {
    expect((await imageByIdentity(node({ [A]: { Id: A } }), check(A, A))).Id).toBe(A);
    const digest = `registry.local:5000/vllm:0.11.0@${D}`;
    const docker = node({ [digest]: { Id: B, RepoDigests: [`registry.local:5000/vllm@${D}`] } });
    expect((await imageByIdentity(docker, check(digest, B))).Id).toBe(B);
  });

  it("a missing image is outwaited, naming node and input", async () => {
    const err = await failure(imageByIdentity(node({}), check(A)));
    expect(err).toMatchObject({ engine: "engine-1", step: "start", failure: "outwait", input: IMAGE_INPUT });
    expect(err.message).toBe(`engine-1: image ${A} is not present on node gpu-a (unix:///run/gpu-a.sock)`);
    expect(err.fix).toContain("on node gpu-a");
  });

  it("an id that resolves to another image is terminal", async () => {
    const err = await failure(imageByIdentity(node({ [A]: { Id: B } }), check(A)));
    expect(err).toMatchObject({ failure: "terminal", input: IMAGE_INPUT });
    expect(err.message).toContain(`resolves on node gpu-a (unix:///run/gpu-a.sock) to ${B}`);
  });

  it("a digest not among the image's RepoDigests is terminal", async () => {
    const digest = `vllm@${D}`;
    const err = await failure(
      imageByIdentity(node({ [digest]: { Id: B, RepoDigests: [`other@${D}`] } }), check(digest)),
    );
    expect(err).toMatchObject({ failure: "terminal", input: IMAGE_INPUT });
    expect(err.message).toContain(`do not include vllm@${D}`);
  });

  it("an image other than the plan's is terminal", async () => {
    const digest = `vllm@${D}`;
    const docker = node({ [digest]: { Id: B, RepoDigests: [`vllm@${D}`] } });
    const err = await failure(imageByIdentity(docker, check(digest, A)));
    expect(err).toMatchObject({ failure: "terminal", input: IMAGE_INPUT });
    expect(err.message).toContain(`but the launch plan was made from ${A}`);
  });

  it("a tag never reaches the daemon", async () => {
    const err = await failure(imageByIdentity(node({ "vllm:latest": { Id: A } }), check("vllm:latest")));
    expect(err).toMatchObject({ failure: "terminal", input: IMAGE_INPUT });
  });
});
