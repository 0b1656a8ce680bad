// Seed 000: `test "$(docker image inspect "$NARWHAL_ENGINE_IMAGE" --format '{{.Id}}')" = "$NARWHAL_ENGINE_IMAGE"`.
// A container engine's image is named by id or registry digest; a tag is an
// error. Validation stays pure: which id the tag resolves to on each node is
// looked up by the CLI (cli/image-tags.ts) from the engines this rule lists.

import { parseImageRef } from "./image-ref.js";
import { launchIssue, type RecordRule } from "./rule-context.js";
import type { EngineLaunchFile } from "./schemas.js";

export const IMAGE_RULE = "image-identity";

/** The variable a raw (unsubstituted) image field is exactly `${NAME}` of, where the operator pastes the id. */
export function imageVariable(rawLaunch: unknown, engine: string): string | undefined {
  const engines = (rawLaunch as { engines?: Record<string, { image?: unknown }> } | undefined)?.engines;
  const raw = engines?.[engine]?.image;
  return typeof raw === "string" ? /^\$\{([A-Z0-9_]+)\}$/.exec(raw)?.[1] : undefined;
}

/** Container records whose image is a tag, with the tag. */
export function taggedImages(launch: EngineLaunchFile): Array<{ engine: string; image: string }> {
  return Object.entries(launch.engines).flatMap(([engine, r]) =>
    r.backend === "container" && r.image !== undefined && parseImageRef(r.image).kind === "tag"
      ? [{ engine, image: r.image }]
      : [],
  );
}

export const imageRules: RecordRule[] = [
  {
    name: IMAGE_RULE,
    needs: "launch",
    check: ({ launch }) =>
      taggedImages(launch).map(({ engine, image }) =>
        launchIssue(
          IMAGE_RULE,
          engine,
          ["image"],
          `${engine}: image ${JSON.stringify(image)} ${
            image.startsWith("sha256:")
              ? "is not an image id (sha256: then 64 lowercase hex digits)"
              : "is a tag, which each host may resolve to a different image"
          }; pin it by id (sha256:<64 hex>, as docker image inspect --format '{{.Id}}' prints it) or by registry digest (name@sha256:<64 hex>)`,
        ),
      ),
  },
];
