// `narwhal plan` for people, in the manner of `terraform plan`: one line per engine with a symbol
// and the reason, every field that forces a replacement with its old and new value, the rollout
// steps in order, what halted, warnings, the serving fleet, and a summary line a person can trust.
import path from "node:path";
import type { SavedPlan } from "../controller/plan-file.js";
import { abbrev } from "../controller/plan-file-staleness.js";
import type { Action, ActionKind, FieldChange, Plan, RolloutPolicy } from "../controller/plan-types.js";
import type { EngineHandle } from "../phases/types.js";
import type { LauncherIdentity } from "../launcher.js";

export const ACTION_SYMBOL: Record<ActionKind, string> = {
  create: "+",
  replace: "~",
  remove: "-",
  "restart-lost": "!",
  retry: "↻",
  adopt: "⇢",
  "sweep-orphan": "x",
  "forget-retiring": "!",
  wait: "…",
  prove: "⇄",
  "restart-unproven": "!",
};

/** A value as JSON, cut short past a line's worth: an edited environment map can be long. */
function value(v: unknown): string {
  if (v === undefined) return "(absent)";
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 160 ? `${text.slice(0, 159)}…` : text;
}

const handleText = (h: EngineHandle) =>
  h.kind === "native" ? `pid ${h.pid}` : `container ${h.container_id.slice(0, 12)}`;

function fieldLine(f: FieldChange): string {
  return `      ${f.path}: ${value(f.old)} → ${value(f.new)}  (forces replacement${f.group ? "; group signature changes" : ""})`;
}

function actionLines(a: Action): string[] {
  const head = (what: string, detail = "") =>
    `  ${ACTION_SYMBOL[a.kind]} ${a.engine}${"role" in a ? ` (${a.role})` : ""}  ${what}${detail}`;
  switch (a.kind) {
    case "replace": {
      const lines = [
        head(
          "replace",
          `: ${a.reason} (input hash ${abbrev(a.from_hash)} → ${abbrev(a.to_hash)}${a.group_changes ? "; group signature changes" : ""})`,
        ),
      ];
      if (a.fields === null)
        lines.push("      (its applied inputs were not recorded: the fields that changed cannot be named)");
      else lines.push(...a.fields.map(fieldLine));
      return lines;
    }
    case "adopt":
      return [head("adopt", `: ${a.reason} (launch token ${abbrev(a.launch_token)})`)];
    case "sweep-orphan":
      return [head("sweep orphan", `: ${a.reason} (${handleText(a.handle)}, launch token ${abbrev(a.launch_token)})`)];
    case "wait":
      return [head(`wait (${a.until})`, `: ${a.why}`)];
    case "prove":
      return [head(`prove KV transfer from ${a.prefill}`, `: ${a.reason}`)];
    case "restart-unproven":
      return [head(`restart-unproven (pair with ${a.prefill})`, `: ${a.reason}`)];
    default:
      return [head(a.kind, `: ${a.reason}`)];
  }
}

function rolloutLines(plan: Plan, policy: RolloutPolicy): string[] {
  if (plan.rollout.length === 0) return [];
  const incompatible =
    policy.incompatible === "pd_units" ? "incompatible: moves as a P/D unit" : "incompatible: all at once (recreate)";
  return [
    "Rollout:",
    ...plan.rollout.map(
      (s, i) => `  step ${i + 1} (${s.status}): ${s.engines.join(", ")}${s.incompatible ? ` — ${incompatible}` : ""}`,
    ),
  ];
}

function servingLines(plan: Plan): string[] {
  const s = plan.serving;
  if (s.engines.length === 0) return ["Serving fleet for this observation: none (no captured engine to list)"];
  return [
    `Serving fleet for this observation${s.group_signature ? ` (group ${s.group_signature})` : ""}:`,
    // A pairing class may span groups (mixed TP): then each engine names its own.
    ...s.engines.map(
      (e) =>
        `  ${e.engine} ${e.role} ${e.url}${!s.group_signature && e.group_signature ? ` (group ${e.group_signature})` : ""}`,
    ),
    ...provenPairsLine(s.pairs ?? []),
  ];
}

/** Pairs named one by one while they fit a line; more (every prefill × decode of a class) are counted. */
const PAIRS_NAMED = 8;

function provenPairsLine(pairs: readonly { prefill: string; decode: string }[]): string[] {
  if (pairs.length === 0) return [];
  if (pairs.length > PAIRS_NAMED) return [`  proven pairs: ${pairs.length} (\`--format json\` lists them)`];
  return [`  proven pairs: ${pairs.map((p) => `${p.prefill} → ${p.decode}`).join(", ")}`];
}

/** Counts by what they do; the first three always, as terraform prints them, the rest when there are any. */
export function summaryLine(plan: Plan, label: string): string {
  if (!plan.changes) {
    // Nothing to do now is not the same as converged: a held or halted rollout must not read as done.
    const waiting = new Set(plan.actions.filter((a) => a.kind === "wait").map((a) => a.engine)).size;
    if (waiting === 0 && plan.halted.length === 0) return `No changes. The fleet matches ${label}.`;
    return `No changes now, but the fleet does not match ${label} yet: ${waiting} engine(s) wait${plan.halted.length ? `, ${plan.halted.length} halted` : ""} (see above).`;
  }
  const count = (k: ActionKind) => plan.actions.filter((a) => a.kind === k).length;
  const parts = [`${count("replace")} to replace`, `${count("create")} to create`, `${count("remove")} to remove`];
  const extra: Array<[ActionKind, string]> = [
    ["restart-lost", "to restart (lost)"],
    ["retry", "to retry"],
    ["adopt", "to adopt"],
    ["sweep-orphan", "orphan(s) to sweep"],
    ["forget-retiring", "lost retiring engine(s) to forget"],
    ["restart-unproven", "decode(s) to restart (unproven pair)"],
    ["prove", "pair(s) to prove"],
  ];
  for (const [k, words] of extra) if (count(k) > 0) parts.push(`${count(k)} ${words}`);
  return `Plan: ${parts.join(", ")}.`;
}

/** The desired directory as the operator named it: relative to where they stand, when it is below it. */
export function desiredLabel(dir: string, cwd: string): string {
  const rel = path.relative(cwd, dir);
  const shown = rel === "" ? "." : rel.startsWith("..") || path.isAbsolute(rel) ? dir : rel;
  return shown.endsWith("/") ? shown : `${shown}/`;
}

/**
 * The launcher the desired engines are prepared by, and the engines whose running launcher differs
 * (a replace whose fields include the launcher's): seed 000, a changed launcher requires a new prepared run.
 */
export function launcherLines(plan: Plan, launcher: LauncherIdentity): string[] {
  const scripts = Object.entries(launcher.scripts)
    .map(([name, sum]) => `${name} ${sum.slice(0, 12)}`)
    .join(", ");
  const replaced = plan.actions.flatMap((a) =>
    a.kind === "replace" && a.fields?.some((f) => f.path.startsWith("launcher.")) ? [a.engine] : [],
  );
  return [
    `Launcher: narwhal ${launcher.version}, digest ${launcher.digest} (plan format ${launcher.plan_format}; ${scripts})` +
      (replaced.length > 0 ? `  (forces replacement: differs from the launcher of ${replaced.join(", ")})` : ""),
  ];
}

/**
 * The whole text of `narwhal plan`; `label` is the desired directory as the operator named it (desiredLabel);
 * `launcher` the one the desired engines are prepared by (absent: no engine is desired).
 */
export function renderPlanText(saved: SavedPlan, label: string, launcher?: LauncherIdentity): string {
  const { plan } = saved;
  const sections: string[][] = [];
  if (launcher) sections.push(launcherLines(plan, launcher));
  if (plan.actions.length > 0) sections.push(plan.actions.flatMap(actionLines));
  sections.push(rolloutLines(plan, saved.desired.rollout));
  if (plan.halted.length > 0)
    sections.push([
      "Halted rollouts (no further engine of the change is touched):",
      ...plan.halted.map((h) => `  ${h.engine}: ${h.why}`),
    ]);
  if (plan.warnings.length > 0) sections.push(["Warnings:", ...plan.warnings.map((w) => `  ! ${w}`)]);
  sections.push(servingLines(plan));
  sections.push([summaryLine(plan, label)]);
  return sections
    .filter((s) => s.length > 0)
    .map((s) => s.join("\n"))
    .join("\n\n");
}
