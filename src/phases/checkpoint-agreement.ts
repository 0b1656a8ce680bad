// seed 000: the discovery record binds the checkpoint to its tree digest, and
// every node an engine of it runs on must hold that same tree. Engines that name
// one checkpoint (the same model.dir and config.json sha256) on different nodes
// must observe one tree digest; otherwise a prefill and its decode would load
// different weights under one group signature. Pure: the controller hands in
// what its other engines' recorded inspections observed.

import type { InspectionProblem } from "./inspect-problems.js";

/** What one engine's inspection observed of its checkpoint. */
export interface CheckpointObservation {
  engine: string;
  node: string;
  model_dir: string;
  config_sha256: string;
  tree_sha256: string;
}

/**
 * The problem with `mine` against the engines already inspected, or undefined. The engines inspected
 * first are the reference: the one that comes later with another tree fails (an engine that runs is
 * never failed after the fact by a newcomer). A pin (model.tree_sha256) settles which tree is right,
 * so with one set the pin check alone decides and this is not asked.
 */
export function checkpointDisagreement(
  mine: CheckpointObservation,
  peers: readonly CheckpointObservation[],
): InspectionProblem | undefined {
  const other = peers
    .filter(
      (p) =>
        p.engine !== mine.engine &&
        p.node !== mine.node &&
        p.model_dir === mine.model_dir &&
        p.config_sha256 === mine.config_sha256 &&
        p.tree_sha256 !== mine.tree_sha256,
    )
    .sort((a, b) => (a.engine < b.engine ? -1 : a.engine > b.engine ? 1 : 0))[0];
  if (!other) return undefined;
  return {
    message:
      `checkpoint ${mine.model_dir} has tree digest ${mine.tree_sha256} on node ${mine.node} (${mine.engine}), ` +
      `but ${other.tree_sha256} on node ${other.node} (${other.engine}): engines of one checkpoint must load the same files`,
    input: `model.dir (NARWHAL_MODEL_DIR) on nodes ${mine.node} and ${other.node}`,
    fix:
      `Provision the same checkpoint on node ${mine.node} as on node ${other.node} (compare their model-manifest.json), ` +
      `or set NARWHAL_MODEL_TREE_SHA256 to the right tree digest. Rerun discovery after changing the provisioned checkpoint.`,
    // Re-provisioning either node clears it without a desired edit: re-checked until it does.
    failure: "outwait",
  };
}
