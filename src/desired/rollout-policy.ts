// fleet.json's `rollout` block with its documented defaults applied. The
// defaults live in the schema (RolloutSchema) so the file and the code cannot
// disagree: a fleet without the block gets exactly what `{}` parses to.
import type { RolloutPolicy } from "../controller/plan-types.js";
import { RolloutSchema, type RolloutBlock } from "./schemas.js";

/** 1 engine per role out of service at a time; incompatible changes in P/D units. */
export const DEFAULT_ROLLOUT: RolloutPolicy = Object.freeze(RolloutSchema.parse({})) as RolloutPolicy;

export function rolloutPolicy(block: RolloutBlock | undefined): RolloutPolicy {
  if (!block) return { ...DEFAULT_ROLLOUT, max_unavailable: {} };
  return {
    max_unavailable: { ...block.max_unavailable },
    default_max_unavailable: block.default_max_unavailable,
    incompatible: block.incompatible,
  };
}
