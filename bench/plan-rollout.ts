// What one plan costs the controller while a change rolls through a large fleet (issue 14): the
// controller plans after every transition, so a plan that grows faster than the fleet blocks its
// event loop for the whole rollout. plan() is pure: measured in-process on fleets built by the
// planner tests' fixtures (test/controller/plan-fixtures.ts), every engine captured and every
// compatible pair proven, then the whole fleet edited. Run by bench/plan-rollout.mjs.
import { createHash } from "node:crypto";
import { plan } from "../src/controller/planner.js";
import { pairKey } from "../src/controller/plan-types.js";
import type { ObservedEngine, ObservedProof, RolloutPolicy } from "../src/controller/plan-types.js";
import { DEFAULT_ROLLOUT } from "../src/desired/rollout-policy.js";
import { DEFAULT_KV } from "../src/desired/kv-policy.js";
import type { EngineSpec } from "../src/desired/types.js";
import {
  captured,
  compatibleEdit,
  desiredFor,
  desiredOf,
  fleetSpecs,
  incompatibleEdit,
  observedOf,
  proofOf,
} from "../test/controller/plan-fixtures.js";

/**
 * pools: 16-engine pools, each its own model and NIXL hash (pairs within a pool only).
 * one-model: the same pools of NIXL hashes (say, engines of several vLLM builds) all serving one model:
 * every pair across pools is one a router could never use, which the plan warns about.
 * (One pool of 1000 engines is 250,000 pairs, each proven: bench/fleet-scale.mjs projects that.)
 */
export type FleetShape = "pools" | "one-model";

function fleet(n: number, shape: FleetShape) {
  const specs = fleetSpecs(n / 2, n / 2);
  const observed = specs.map(desiredOf).map((d, i): ObservedEngine => {
    const k = d.role === "prefill" ? i : i - n / 2;
    const cls = Math.floor(k / 8);
    return captured(d, { nixl_hash: `nixl-${cls}`, model_tree_sha256: shape === "pools" ? `tree-${cls}` : "tree" });
  });
  const proofs: Record<string, ObservedProof> = {};
  const of = (role: string) => observed.filter((o) => o.role === role);
  for (const p of of("prefill"))
    for (const d of of("decode")) if (p.nixl_hash === d.nixl_hash) proofs[pairKey(p.engine, d.engine)] = proofOf(p, d);
  return { specs, observed: observedOf(observed, { proofs }) };
}

const PERCENT: RolloutPolicy = { ...DEFAULT_ROLLOUT, max_unavailable: {}, default_max_unavailable: "25%" };
const CASES: Array<{ name: string; edit: (s: EngineSpec) => EngineSpec; rollout: RolloutPolicy }> = [
  { name: "converged", edit: (s) => s, rollout: DEFAULT_ROLLOUT },
  { name: "compatible edit, max_unavailable 1", edit: compatibleEdit, rollout: DEFAULT_ROLLOUT },
  { name: "compatible edit, max_unavailable 25%", edit: compatibleEdit, rollout: PERCENT },
  { name: "incompatible edit, max_unavailable 1", edit: incompatibleEdit, rollout: DEFAULT_ROLLOUT },
  { name: "incompatible edit, max_unavailable 25%", edit: incompatibleEdit, rollout: PERCENT },
];

export interface PlanRolloutRow {
  shape: FleetShape;
  engines: number;
  case: string;
  median_ms: number;
  actions: number;
  /** sha256 of the plan's JSON, first 12 hex: two builds that plan alike print the same. */
  plan_sha: string;
}

export function planRollout(sizes: number[], runs: number): PlanRolloutRow[] {
  const rows: PlanRolloutRow[] = [];
  for (const shape of ["pools", "one-model"] as const)
    for (const n of sizes) {
      const { specs, observed } = fleet(n, shape);
      for (const c of CASES) {
        const desired = desiredFor(
          specs.map((s) => desiredOf(c.edit(s))),
          c.rollout,
          DEFAULT_KV,
        );
        const policy = { rollout: c.rollout, startup: false };
        const out = plan(desired, observed, policy); // once to warm up, and the plan reported
        const times: number[] = [];
        for (let i = 0; i < runs; i++) {
          const t0 = performance.now();
          plan(desired, observed, policy);
          times.push(performance.now() - t0);
        }
        times.sort((a, b) => a - b);
        rows.push({
          shape,
          engines: n,
          case: c.name,
          median_ms: Math.round(times[Math.floor(times.length / 2)]! * 10) / 10,
          actions: out.actions.length,
          plan_sha: createHash("sha256").update(JSON.stringify(out)).digest("hex").slice(0, 12),
        });
      }
    }
  return rows;
}
