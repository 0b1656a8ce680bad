// The engine's image by identity (seed 000): before an inspection, a check or a
// start, the node's Docker must hold exactly the image NARWHAL_ENGINE_IMAGE
// names — for an id, the image's Id is it; for a registry digest, one of the
// image's RepoDigests is it — and, once a plan exists, the image the plan was
// made from. narwhal never pulls: what is missing is the operator's to load.
import type Docker from "dockerode";
import { PhaseError, type FailureClass, type Step } from "../errors.js";
import { parseImageRef, repositoryOf } from "../desired/image-ref.js";
import type { DockerCalls } from "./docker-calls.js";
import type { LaunchPlan } from "../phases/plan.js";

export const IMAGE_INPUT = "NARWHAL_ENGINE_IMAGE (engine-launch.json image)";

export interface ImageCheck {
  engine: string;
  step: Step;
  node: string;
  /** The configured reference: an id or name@digest. */
  ref: string;
  /** The image id the plan was made from (check and start), absent at inspection. */
  planned?: string;
}

/** The node's image for `ref`, or a terminal (mismatch) or outwaited (missing) error that names engine, node and fix. */
export async function imageByIdentity(
  docker: DockerCalls,
  c: ImageCheck,
  signal?: AbortSignal,
): Promise<Docker.ImageInspectInfo> {
  const on = `on node ${c.node} (${docker.endpoint})`;
  const fail = (message: string, fix: string, failure: FailureClass = "terminal") =>
    new PhaseError(c.engine, c.step, `${c.engine}: ${message}`, { failure, input: IMAGE_INPUT, fix });
  const parsed = parseImageRef(c.ref);
  if (parsed.kind === "tag")
    throw fail(
      `image ${c.ref} is a tag, not an image id or registry digest`,
      "Run narwhal validate: it prints the id to paste.",
    );
  const info = await docker.inspectImage(c.ref, signal);
  // An image not loaded yet is the host's to provide: outwaited, re-checked until it is there.
  if (!info)
    throw fail(
      `image ${c.ref} is not present ${on}`,
      `Load or pull exactly that image on node ${c.node} (docker load / docker pull ${c.ref}); narwhal never pulls, and goes on once it is there.`,
      "outwait",
    );
  if (parsed.kind === "id" && info.Id !== parsed.id)
    throw fail(
      `image ${c.ref} resolves ${on} to ${info.Id}, not to itself`,
      `Set ${IMAGE_INPUT} to the id node ${c.node} holds, or load the image whose id it names there.`,
    );
  if (parsed.kind === "digest") {
    const pinned = `${repositoryOf(parsed.name)}@${parsed.digest}`;
    if (!(info.RepoDigests ?? []).includes(pinned))
      throw fail(
        `image ${c.ref}: the runtime's resolved digests ${on} ${JSON.stringify(info.RepoDigests ?? [])} do not include ${pinned}`,
        `Pull ${pinned} on node ${c.node}, or correct the digest in ${IMAGE_INPUT}.`,
      );
  }
  if (c.planned !== undefined && info.Id !== c.planned)
    throw fail(
      `image ${c.ref} is ${info.Id} ${on}, but the launch plan was made from ${c.planned}`,
      `Restore image ${c.planned} on node ${c.node}; narwhal prepares a new run when the desired image changes.`,
    );
  return info;
}

/** Before a check or a start: the node holds the plan's image, by the configured identity. */
export async function verifyPlanImage(
  docker: DockerCalls,
  plan: Pick<LaunchPlan, "engine" | "image" | "node">,
  step: "check" | "start",
  signal?: AbortSignal,
): Promise<void> {
  const ref = plan.image?.ref ?? "";
  await imageByIdentity(
    docker,
    { engine: plan.engine, step, node: plan.node.name, ref, planned: plan.image?.id ?? "" },
    signal,
  );
}
