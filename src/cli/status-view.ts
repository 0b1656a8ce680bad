// Rendering `narwhal status`: a table for people, JSON for programs.
import type { EngineRecord, StateFile } from "../state/store.js";
import type { EngineHandle } from "../phases/types.js";
import type { EngineContext } from "../../machines/engine-context.js";
import { groupReport } from "../controller/groups.js";

export interface StatusView {
  engines: Array<
    EngineRecord & {
      pid: number | null;
      container_id: string | null;
      /** True when pid/container_id name the engine kept serving old inputs while its replacement is prepared. */
      retiring: boolean;
      layout_matches_group: boolean | null;
    }
  >;
  groups: ReturnType<typeof groupReport>;
}

export function statusView(state: StateFile, engine?: string): StatusView {
  const records = Object.values(state.engines).sort((a, b) => a.engine.localeCompare(b.engine));
  const groups = groupReport(records);
  const differing = new Set(groups.flatMap((g) => g.differing));
  const engines = records
    .filter((r) => !engine || r.engine === engine)
    .map((r) => {
      const { snapshot: _omit, ...rest } = r;
      void _omit;
      // While a replacement is checked, the engine still serving is only in the snapshot: show it.
      const retiring: EngineHandle | null = (r.snapshot as { context?: Partial<EngineContext> } | null)?.context?.retiring?.handle ?? null;
      const handle = r.handle ?? retiring;
      return {
        ...rest,
        snapshot: undefined,
        pid: handle?.kind === "native" ? handle.pid : null,
        container_id: handle?.kind === "container" ? handle.container_id : null,
        retiring: !r.handle && !!retiring,
        layout_matches_group: r.layout ? !differing.has(r.engine) : null,
      };
    });
  return { engines, groups };
}

const short = (s: string | null | undefined, n = 12) => (s ? s.slice(0, n) : "-");

export function renderStatusText(view: StatusView, detail: boolean): string {
  const rows = [["ENGINE", "PHASE", "DESIRED", "RUNNING", "GROUP", "PID/CONTAINER", "ATTEMPTS", "LAST ERROR"]];
  for (const e of view.engines) {
    rows.push([
      e.engine,
      e.phase,
      short(e.desired_hash),
      short(e.running_hash),
      short(e.group_signature, 16),
      (e.pid !== null ? String(e.pid) : short(e.container_id)) + (e.retiring ? " (retiring)" : ""),
      String(e.attempts),
      e.last_error ? `${e.last_error.step ?? ""}: ${e.last_error.message}`.split("\n")[0]!.slice(0, 80) : "-",
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const lines = rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  "));
  if (detail) {
    for (const e of view.engines) {
      lines.push("", `${e.engine}:`, `  run directory: ${e.run_dir ?? "-"}`, `  plan sha256:   ${e.plan_sha256 ?? "-"}`);
      for (const c of e.conditions) lines.push(`  ${c.type}=${c.status} (${c.reason}) ${c.message}${c.lastTransitionTime ? ` [since ${c.lastTransitionTime}]` : ""}`);
      if (e.layout) lines.push(`  cache layout: ${e.layout.num_gpu_blocks} blocks × ${e.layout.block_size} tokens, ${e.layout.gpu_kv_cache_tokens} tokens; matches group: ${e.layout_matches_group}`);
      if (e.last_error) lines.push(`  last error: ${e.last_error.message}${e.last_error.fix ? `\n  fix: ${e.last_error.fix}` : ""}`);
      lines.push("  history:");
      for (const h of e.history.slice(-10)) lines.push(`    ${h.at} ${h.from} → ${h.to}${h.note ? ` (${h.note.split("\n")[0]})` : ""}`);
    }
  }
  return lines.join("\n");
}
