// The planner's view of a desired state: per engine what the fleet record
// lists and the hashed inputs (no secrets: the API key is only its digest),
// so a plan can be computed, printed and saved without holding a key.
import { inputHashMaterial } from "../desired/hash.js";
import type { DesiredState } from "../desired/types.js";
import type { DesiredForPlan } from "./plan-types.js";

export function desiredForPlan(desired: DesiredState): DesiredForPlan {
  return {
    engines: desired.specs.map((spec) => ({
      engine: spec.name,
      role: spec.role,
      backend: spec.backend,
      iid: spec.iid,
      url: spec.url,
      attestation_url: spec.attestation_url,
      input_hash: spec.input_hash,
      inputs: inputHashMaterial(spec),
    })),
    rollout: desired.rollout,
  };
}
