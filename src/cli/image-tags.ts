// The image-identity issue, made actionable: validation is pure, so which id a
// tag resolves to is looked up here, on each node that runs the engine (its
// Docker endpoint, over ssh where the node has one), best-effort under a short
// deadline. The issue then names the id per node and the exact line to paste;
// a node that cannot be asked is said so, and the command fails as invalid all the same.
import { recordedValidation } from "../state/desired-summary.js";
import type { Config } from "../config.js";
import { DesiredStateError, type ValidationIssue } from "../errors.js";
import { validateDesired, type ValidationResult } from "../desired/load.js";
import type { DesiredState } from "../desired/types.js";
import type { ImageTag } from "../desired/image-tags.js";
import { IMAGE_RULE } from "../desired/rules-image.js";
import { recPath, LAUNCH_FILE } from "../desired/rule-context.js";
import type { ContainerBackend } from "../backends/container.js";
import { ENV_FILE } from "../desired/rules-variables.js";

/** How long one node may take to say what a tag is: validate must stay quick when a node is down. */
export const IMAGE_LOOKUP_MS = 3000;

/** The issues with each image-identity message extended by what each node resolves the tag to. */
export async function explainImageTags(result: ValidationResult, config: Config): Promise<ValidationIssue[]> {
  const tags = result.imageTags ?? [];
  if (!tags.length) return result.issues;
  // The backends (and dockerode with them) load only when a tag is to be looked up: a valid tree needs neither.
  const [{ backendsFor, nodeHostsFor }, { ContainerBackend }] = await Promise.all([
    import("../backends/for-config.js"),
    import("../backends/container.js"),
  ]);
  const hosts = nodeHostsFor(config);
  try {
    hosts.learn(tags.flatMap((t) => t.nodes.map((node) => ({ node }))));
    const container = backendsFor(config, undefined, hosts).container;
    if (!(container instanceof ContainerBackend)) return result.issues;
    const explained = new Map<string, string>();
    for (const t of tags) explained.set(recPath(t.engine, "image"), await resolveTag(container, t));
    return result.issues.map((i) =>
      i.rule === IMAGE_RULE && i.file === LAUNCH_FILE && explained.has(i.path)
        ? { ...i, message: `${i.message}; ${explained.get(i.path)}` }
        : i,
    );
  } finally {
    await hosts.close();
  }
}

async function resolveTag(container: ContainerBackend, t: ImageTag): Promise<string> {
  if (!t.nodes.length) return `no node of fleet.json runs ${t.engine}, so no node was asked what ${t.image} is`;
  const found = await Promise.all(
    t.nodes.map(async (node) => {
      const docker = container.client(node.docker_host);
      const where = `node ${node.name} (${docker.endpoint})`;
      try {
        const info = await docker.inspectImage(t.image, AbortSignal.timeout(IMAGE_LOOKUP_MS));
        if (!info) return { text: `on ${where} no image is tagged ${t.image}` };
        return { text: `on ${where} ${t.image} is ${info.Id}`, id: info.Id };
      } catch (err) {
        return { text: `${where} could not be asked (${(err as Error).message})` };
      }
    }),
  );
  const ids = [...new Set(found.flatMap((f) => (f.id ? [f.id] : [])))];
  const where = found.map((f) => f.text).join("; ");
  if (ids.length === 0)
    return `${where}; load the image on the engine's node, then paste the id docker image inspect ${t.image} --format '{{.Id}}' prints there`;
  if (ids.length > 1)
    return `${where}; the nodes hold different images under one tag: load one image on every node and paste its id`;
  const paste = t.variable ? `${ENV_FILE}: ${t.variable}=${ids[0]}` : `${LAUNCH_FILE}: "image": "${ids[0]}"`;
  return `${where}; paste into ${paste}`;
}

/** loadDesired for the commands that act (reconcile, apply): an invalid state throws with the image ids explained. */
export async function loadDesiredExplained(config: Config): Promise<DesiredState> {
  // What the controller recorded of its last valid desired state: the same texts are not judged by the rules again.
  const result = await validateDesired(config.desiredDir, { recorded: await recordedValidation(config.stateDir) });
  if (!result.state) throw new DesiredStateError(await explainImageTags(result, config));
  return result.state;
}
