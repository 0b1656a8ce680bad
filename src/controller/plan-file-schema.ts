// The zod schema of a saved plan (`narwhal plan --out FILE`), for reading it back in `narwhal apply`.
// What it parses is returned as plan-file.ts's SavedPlan (built on plan-types.ts), so a required field
// the planner adds to its types and not here is a compile error, not a value silently dropped.
// Objects are loose: a field added later is kept through a read, not stripped.
import * as z from "zod";
import { API_VERSION } from "../api-version.js";

export const PLAN_API_VERSION = API_VERSION;
export const PLAN_KIND = "Plan";

const hash = z.string().describe("an input hash (sha256 hex)");

const HandleSchema = z
  .discriminatedUnion("kind", [
    z.looseObject({
      kind: z.literal("native"),
      pid: z.number().int().describe("process group leader"),
      pgid: z.number().int().describe("process group"),
      boot_id: z.string().describe("kernel boot id the process was started under"),
      start_ticks: z.number().int().describe("its start time (field 22 of /proc/<pid>/stat)"),
      launch_token: z.string().describe("the identity narwhal gave this start"),
    }),
    z.looseObject({
      kind: z.literal("container"),
      container_id: z.string().describe("Docker container id"),
      launch_token: z.string().describe("the identity narwhal gave this start (label io.narwhal.launch-token)"),
      docker_host: z.string().optional().describe("Docker endpoint it runs on; absent: the default"),
    }),
  ])
  .describe("a running engine: a native process group or a container");

const FieldChangeSchema = z.looseObject({
  path: z.string().describe('JSON path into the engine\'s inputs, e.g. "launch.runtime.extra_args[2]"'),
  old: z.unknown().describe("the applied value (absent: the field was not set)"),
  new: z.unknown().describe("the desired value (absent: the field is no longer set)"),
  group: z.boolean().describe("the field feeds the group signature: old and new engines cannot pair"),
});

const engine = z.string().describe("engine name (engine-<n>)");
const reason = z.string().describe("why, in words an operator reads");

const ActionSchema = z
  .discriminatedUnion("kind", [
    z.looseObject({ kind: z.literal("create"), engine, role: z.string().describe("its role"), reason }),
    z.looseObject({
      kind: z.literal("replace"),
      engine,
      role: z.string().describe("its role"),
      from_hash: hash.describe("input hash applied now"),
      to_hash: hash.describe("input hash desired"),
      fields: z
        .array(FieldChangeSchema)
        .nullable()
        .describe("the input fields that force it (null: applied inputs not recorded)"),
      group_changes: z.boolean().describe("the group signature changes"),
      reason,
    }),
    z.looseObject({ kind: z.literal("restart-lost"), engine, reason }),
    z.looseObject({ kind: z.literal("retry"), engine, reason }),
    z.looseObject({ kind: z.literal("remove"), engine, reason }),
    z.looseObject({
      kind: z.literal("adopt"),
      engine,
      launch_token: z.string().describe("the running engine taken over"),
      reason,
    }),
    z.looseObject({
      kind: z.literal("sweep-orphan"),
      engine,
      launch_token: z.string().describe("the orphan's launch token"),
      handle: HandleSchema,
      reason,
    }),
    z.looseObject({ kind: z.literal("forget-retiring"), engine, reason }),
    z.looseObject({
      kind: z.literal("wait"),
      engine,
      why: reason,
      until: z.enum(["rollout", "step", "observation", "halted", "backoff", "suspended"]).describe("what it waits for"),
    }),
    z.looseObject({
      kind: z.literal("prove"),
      engine: engine.describe("the decode proven (its queue key)"),
      prefill: engine.describe("the prefill whose KV it pulls"),
      reason,
    }),
    z.looseObject({
      kind: z.literal("restart-unproven"),
      engine: engine.describe("the decode restarted"),
      prefill: engine.describe("the prefill of the pair that is not proven"),
      reason,
    }),
  ])
  .describe("one action of the plan");

const ServingFleetSchema = z.looseObject({
  group_signature: z
    .string()
    .nullable()
    .describe("the one cache-equivalence group of the listed prefill/decode engines (null: none, or several)"),
  pairing_class: z
    .string()
    .nullable()
    .optional()
    .describe("what the listed prefill/decode engines pair by: NIXL hash and model tree (absent: a plan from before)"),
  engines: z
    .array(
      z.looseObject({
        iid: z.string().describe("fleet record iid"),
        url: z.string().describe("engine HTTP URL"),
        attestation_url: z.string().describe("attestation URL"),
        role: z.string().describe("role"),
        engine,
        group_signature: z.string().describe("its group signature"),
      }),
    )
    .describe("what a router may send traffic to"),
  pairs: z
    .array(z.looseObject({ prefill: engine, decode: engine }))
    .optional()
    .describe("the proven prefill → decode pairs among the listed engines (absent: a plan from before proofs)"),
});

export const PlanSchema = z
  .looseObject({
    actions: z.array(ActionSchema).describe("every action, in the order the controller executes them"),
    rollout: z
      .array(
        z.looseObject({
          engines: z.array(engine).describe("engines released together"),
          incompatible: z.boolean().describe("the change alters the group signature"),
          status: z.enum(["now", "later", "halted"]).describe("released by this plan, after earlier steps, or halted"),
        }),
      )
      .describe("the rollout of pending changes, in order"),
    halted: z
      .array(z.looseObject({ engine, why: reason }))
      .describe("engines whose failed replacement halted a rollout"),
    serving: ServingFleetSchema.describe("what serving-fleet.json should list after this observation"),
    warnings: z.array(z.string()).describe("findings an operator must read"),
    changes: z.boolean().describe("anything would change (exit 2 of narwhal plan)"),
  })
  .describe("the plan: what the controller would do");

const limit = z.union([z.number(), z.string()]).describe('a count, or a percentage such as "25%"');

export const RolloutPolicySchema = z
  .looseObject({
    max_unavailable: z.record(z.string(), limit).describe("per role: how many may be out of service at once"),
    default_max_unavailable: limit.describe("for roles not named"),
    incompatible: z.enum(["pd_units", "recreate"]).describe("how a change of the group signature moves"),
  })
  .describe("the rollout policy the plan was computed with");

export const KvPolicySchema = z
  .looseObject({
    prove: z.boolean().describe("pairs are proven before they serve"),
    on_failure: z.enum(["restart_decode", "hold"]).describe("what a failed proof does"),
    on_prefill_restart: z.enum(["reprove", "restart_decodes"]).describe("what a prefill restart does to its decodes"),
    max_decode_restarts: z.number().describe("decode restarts after failed proofs in a row"),
    watch_interval_s: z.number().describe("seconds between scrapes of the decodes' KV metrics"),
  })
  .describe("the kv_transfer policy the plan was computed with");

const liveness = z.enum(["alive", "gone", "unknown"]).describe("alive, gone, or not observable");

export const ObservedEngineProjectionSchema = z.strictObject({
  phase: z.string().describe("phase of its actor or record"),
  applied_hash: z.string().describe("input hash last applied"),
  running_hash: z.string().nullable().describe("input hash of the engine that runs (null: none)"),
  launch_token: z.string().nullable().describe("launch token of its running engine (null: none recorded)"),
  liveness: liveness.nullable().describe("liveness of that engine (null: none recorded)"),
  retiring: z
    .strictObject({ launch_token: z.string().describe("the retiring engine's launch token"), liveness })
    .nullable()
    .describe("the engine kept serving old inputs during a replacement"),
  terminal: z.boolean().describe("terminally failed"),
  deferred: z
    .strictObject({
      desiredHash: z.string().optional().describe("held desired hash"),
      remove: z.boolean().optional().describe("held removal"),
    })
    .nullable()
    .describe("a desired-state event held until a step settles"),
});

export const SavedPlanSchema = z
  .strictObject({
    apiVersion: z.literal(PLAN_API_VERSION).describe("format version of this file"),
    kind: z.literal(PLAN_KIND).describe("what this file is"),
    created_at: z.string().describe("ISO time the plan was computed"),
    desired_dir: z.string().describe("desired-state directory the plan was computed from (absolute)"),
    state_dir: z.string().describe("state directory the plan was computed against (absolute)"),
    desired: z
      .strictObject({
        engines: z.record(engine, hash).describe("per desired engine: its input hash"),
        rollout: RolloutPolicySchema,
        kv: KvPolicySchema.optional().describe("absent in plans saved before KV proofs"),
      })
      .describe("fingerprint of the desired state"),
    observed: z
      .strictObject({
        engines: z
          .record(engine, ObservedEngineProjectionSchema)
          .describe("per engine known to the state: what was observed"),
        owned: z
          .array(z.strictObject({ engine, launch_token: z.string().describe("launch token") }))
          .describe("engines this state directory started that ran, by launch token"),
      })
      .describe("a stable projection of what was observed (no times)"),
    plan: PlanSchema,
  })
  .describe("a plan saved by narwhal plan --out, executed by narwhal apply");
