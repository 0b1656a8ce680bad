// The engines an image-identity issue is about, with the nodes that run them
// (as spec.ts builds them) and the variable the operator pastes the id into:
// what the CLI (cli/image-tags.ts) resolves each tag against. Apart from
// rules-image.ts, which spec.ts's rules import, so the two never form a cycle.
import type { FleetForRules } from "./records-for-rules.js";
import type { EngineLaunchFile } from "./schemas.js";
import type { NodeSpec } from "./types.js";
import { indexOfEngineName, indexOfIid } from "./engine-pairs.js";
import { imageVariable, taggedImages } from "./rules-image.js";
import { nodeSpec } from "./spec.js";

/** A container engine whose image is a tag, the nodes that run it and the variable its image comes from. */
export interface ImageTag {
  engine: string;
  image: string;
  /** `NAME` when the raw image field is exactly `${NAME}` (deployment.env is where the id goes). */
  variable?: string;
  nodes: NodeSpec[];
}

/** What the CLI resolves for the image-identity issues: each tagged engine with the nodes (fleet.json) it runs on. */
export function imageTagsToResolve(
  dir: string,
  launch: EngineLaunchFile | undefined,
  fleet: FleetForRules | undefined,
  rawLaunch: unknown,
): ImageTag[] {
  if (!launch) return [];
  return taggedImages(launch).map(({ engine, image }) => {
    const k = indexOfEngineName(engine);
    const nodes = (fleet?.nodes ?? []).filter((n) => n !== undefined && n.engines.some((iid) => indexOfIid(iid) === k));
    const variable = imageVariable(rawLaunch, engine);
    return { engine, image, ...(variable ? { variable } : {}), nodes: nodes.map((n) => nodeSpec(dir, n!)) };
  });
}
