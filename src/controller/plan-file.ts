// The saved plan: what `narwhal plan --out FILE` writes and `narwhal apply FILE` executes.
// Beside the plan it keeps what the plan was computed from — a fingerprint of the desired
// state and a stable projection of the observation (no times) — so apply can tell, field by
// field, whether the world moved since (staleness, plan-file-staleness.ts).
import { NarwhalError } from "../errors.js";
import { readRegularFile, writeFileAtomic } from "../state/atomic-file.js";
import { PLAN_API_VERSION, PLAN_KIND, SavedPlanSchema } from "./plan-file-schema.js";
import type { DesiredForPlan, KvPolicy, Liveness, Observed, Plan, RolloutPolicy } from "./plan-types.js";
import { compareNames } from "./in-service.js";

export { PLAN_API_VERSION, PLAN_KIND } from "./plan-file-schema.js";
export { staleness } from "./plan-file-staleness.js";

/** The desired state a plan was computed from: what can change the plan, nothing else. */
export interface DesiredFingerprint {
  /** Per desired engine: its input hash. */
  engines: Record<string, string>;
  rollout: RolloutPolicy;
  /** fleet.json kv_transfer as applied (absent in plans saved before KV proofs). */
  kv?: KvPolicy;
}

/** One engine as observed, without times, attempt counts or anything else that moves on its own. */
export interface ObservedEngineProjection {
  phase: string;
  applied_hash: string;
  running_hash: string | null;
  /** Launch token of its recorded running engine (null: none). */
  launch_token: string | null;
  liveness: Liveness | null;
  retiring: { launch_token: string; liveness: Liveness } | null;
  terminal: boolean;
  deferred: { desiredHash?: string; remove?: boolean } | null;
}

export interface ObservedProjection {
  engines: Record<string, ObservedEngineProjection>;
  /** What this state directory started that runs, sorted by engine then token. */
  owned: Array<{ engine: string; launch_token: string }>;
}

export interface SavedPlan {
  apiVersion: typeof PLAN_API_VERSION;
  kind: typeof PLAN_KIND;
  created_at: string;
  desired_dir: string;
  state_dir: string;
  desired: DesiredFingerprint;
  observed: ObservedProjection;
  plan: Plan;
}

const byName = <T>(entries: Array<[string, T]>): Record<string, T> =>
  Object.fromEntries(entries.sort(([a], [b]) => compareNames(a, b)));

export function desiredFingerprint(desired: DesiredForPlan): DesiredFingerprint {
  return {
    engines: byName(desired.engines.map((e) => [e.engine, e.input_hash])),
    rollout: desired.rollout,
    kv: desired.kv,
  };
}

export function observedProjection(observed: Observed): ObservedProjection {
  const engines = byName(
    Object.values(observed.engines).map((e): [string, ObservedEngineProjection] => [
      e.engine,
      {
        phase: e.phase,
        applied_hash: e.applied_hash,
        running_hash: e.running_hash,
        launch_token: e.handle?.launch_token ?? null,
        liveness: e.handle ? e.liveness : null,
        retiring: e.retiring ? { launch_token: e.retiring.handle.launch_token, liveness: e.retiring.liveness } : null,
        terminal: e.terminal,
        deferred: e.deferred ? { ...e.deferred } : null,
      },
    ]),
  );
  const owned = observed.owned
    .map((o) => ({ engine: o.engine, launch_token: o.launch_token }))
    .sort((a, b) => compareNames(a.engine, b.engine) || a.launch_token.localeCompare(b.launch_token));
  return { engines, owned };
}

export interface PlanSource {
  desired: DesiredForPlan;
  observed: Observed;
  plan: Plan;
  desiredDir: string;
  stateDir: string;
  /** When the plan was computed (default: now). */
  at?: Date;
}

export function savedPlan(src: PlanSource): SavedPlan {
  return {
    apiVersion: PLAN_API_VERSION,
    kind: PLAN_KIND,
    created_at: (src.at ?? new Date()).toISOString(),
    desired_dir: src.desiredDir,
    state_dir: src.stateDir,
    desired: desiredFingerprint(src.desired),
    observed: observedProjection(src.observed),
    plan: src.plan,
  };
}

/** The file's text: the same object `narwhal plan --format json` prints. */
export const planFileText = (saved: SavedPlan): string => JSON.stringify(saved, null, 2) + "\n";

/** Written whole or not at all, private (0600): it names the fleet's URLs and run state. */
export async function writePlanFile(file: string, saved: SavedPlan): Promise<void> {
  await writeFileAtomic(file, planFileText(saved), 0o600);
}

const notAPlan = (file: string, why: string) =>
  new NarwhalError(`${file} is not a narwhal plan: ${why}`, {
    step: "load",
    input: file,
    fix: "Pass a file written by `narwhal plan --out FILE` (or run narwhal plan again to write one).",
    retryable: false,
  });

/** Parse a saved plan's text; anything else is an error naming the file and what is wrong with it. */
export function parseSavedPlan(text: string, file: string): SavedPlan {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw notAPlan(file, `not JSON (${(err as Error).message})`);
  }
  const head = json as { apiVersion?: unknown; kind?: unknown } | null;
  if (head && typeof head === "object" && head.kind === PLAN_KIND && head.apiVersion !== PLAN_API_VERSION) {
    throw notAPlan(
      file,
      `apiVersion ${JSON.stringify(head.apiVersion)} is not ${PLAN_API_VERSION} (written by another narwhal version)`,
    );
  }
  const parsed = SavedPlanSchema.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues.slice(0, 5).map((i) => `${["$", ...i.path.map(String)].join(".")}: ${i.message}`);
    const more = parsed.error.issues.length > 5 ? ` (and ${parsed.error.issues.length - 5} more)` : "";
    throw notAPlan(file, first.join("; ") + more);
  }
  return parsed.data;
}

export async function readPlanFile(file: string): Promise<SavedPlan> {
  const read = await readRegularFile(file);
  if (read.kind === "missing") {
    throw new NarwhalError(`plan file ${file} does not exist`, {
      step: "load",
      input: file,
      fix: "Write one with `narwhal plan --out FILE`, then pass that file to narwhal apply.",
      retryable: false,
    });
  }
  if (read.kind === "not-regular") throw notAPlan(file, `it is ${read.what}`);
  return parseSavedPlan(read.text, file);
}
