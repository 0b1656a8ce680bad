// The planner's view of a desired state: per engine what the fleet record
// lists and the hashed inputs (no secrets: the API key is only its digest),
// so a plan can be computed, printed and saved without holding a key.
import { inputHashMaterial } from "../desired/hash.js";
import type { DesiredState, EngineSpec } from "../desired/types.js";
import type { DesiredForPlan } from "./plan-types.js";

/** The hashed inputs of a spec as plain JSON (what the state records as applied_inputs), so both sides of a diff have one shape. */
export function specInputs(spec: EngineSpec): Record<string, unknown> {
  return JSON.parse(JSON.stringify(inputHashMaterial(spec))) as Record<string, unknown>;
}

export function desiredForPlan(
  desired: Pick<DesiredState, "specs" | "rollout" | "kv">,
  inputsOf: (spec: EngineSpec) => Record<string, unknown> = specInputs,
): DesiredForPlan {
  return {
    engines: desired.specs.map((spec) => {
      let inputs: Record<string, unknown> | undefined;
      return {
        engine: spec.name,
        role: spec.role,
        backend: spec.backend,
        iid: spec.iid,
        url: spec.url,
        attestation_url: spec.attestation_url,
        input_hash: spec.input_hash,
        // Made on first read: a plan reads an engine's inputs only to name what changed (or a pairing
        // warning's fields), and a JSON copy of each of 1000 engines' inputs was ~36 ms of a no-op plan.
        get inputs() {
          return (inputs ??= inputsOf(spec));
        },
      };
    }),
    rollout: desired.rollout,
    kv: desired.kv,
  };
}
