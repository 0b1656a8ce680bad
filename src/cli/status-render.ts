// `narwhal status` for people: what is known about the whole state directory
// (controller, desired/, the no-controller check) once above the table, then
// one row per engine; `status ENGINE` adds its details.
import type { ControllerView, DesiredNow, Live, StatusEngine, StatusView } from "./status-view.js";
import { append } from "../controller/map-lists.js";

const short = (s: string | null | undefined, n = 12) => (s ? s.slice(0, n) : "-");

/** "12s", "5m", "3h", "2d" since `iso`, as kubectl's AGE; "-" when never. A time ahead of the clock (skew) reads as now. */
export function since(iso: string | null | undefined, now: number): string {
  if (!iso) return "-";
  const at = Date.parse(iso);
  if (!Number.isFinite(at)) return "-";
  const s = Math.max(0, Math.floor((now - at) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 120 * 60) return `${Math.floor(s / 60)}m`;
  if (s < 48 * 3600) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

/** "12s ago", "5m ago", "3h ago", "2d ago"; "-" when never. */
export function age(iso: string | null | undefined, now: number): string {
  const s = since(iso, now);
  return s === "-" ? s : `${s} ago`;
}

/** When the engine entered the phase it is in: its last transition there (else its record's last write). */
export function phaseSince(e: Pick<StatusEngine, "phase" | "history" | "updated_at">): string | null {
  const entered = e.history.findLast((h) => h.to === e.phase);
  return entered?.at ?? e.updated_at;
}

/** SGR colours for a terminal; `plain` paints nothing (a pipe, NO_COLOR, --no-color). */
export interface Paint {
  ok(s: string): string;
  warn(s: string): string;
  bad(s: string): string;
}
const sgr = (code: number) => (s: string) => `\x1b[${code}m${s}\x1b[0m`;
export const colours: Paint = { ok: sgr(32), warn: sgr(33), bad: sgr(31) };
export const plain: Paint = { ok: (s) => s, warn: (s) => s, bad: (s) => s };

/** A phase cell: captured is done, failed needs the operator, anything else is on its way. */
function phaseColour(phase: string, paint: Paint): (s: string) => string {
  return phase === "captured" ? paint.ok : phase === "failed" ? paint.bad : paint.warn;
}

export function controllerLine(c: ControllerView): string {
  if (c.running && c.holder) {
    const h = c.holder;
    return `controller: running, pid ${h.pid} on host ${h.host} since ${h.since}${c.remote ? " (another host: not checked from here)" : ""}`;
  }
  const written = c.state_written_at ? `state last written ${c.state_written_at}` : "no state written yet";
  if (c.running === null) return `controller: unknown (${c.problem ?? "the state lock cannot be read"}; ${written})`;
  if (c.stale && c.holder)
    return `controller: not running (stale lock of pid ${c.holder.pid} on host ${c.holder.host} since ${c.holder.since}; ${written})`;
  return `controller: not running (${written})`;
}

/** DESIRED: the hash desired/ gives now; "?" when desired/ could not be loaded; "-" when the engine is not in it. */
function desiredCell(e: StatusEngine, desired: DesiredNow | null): string {
  if (!desired?.valid) return "?";
  return short(e.desired_hash_now);
}

export function liveCell(live: Live | null): string {
  if (!live) return "-";
  return live.liveness === "alive" ? "alive" : `${live.liveness}: ${live.problem ?? "no reason given"}`;
}

/**
 * One line per node fault (NodeReachable=False), naming the engines it blocks: a node that does
 * not answer is one fact about many rows, and a captured engine behind it shows no error in the table.
 */
function unreachableLines(view: StatusView): string[] {
  const byFault = new Map<string, string[]>();
  for (const e of view.engines) {
    const c = e.conditions.find((x) => x.type === "NodeReachable" && x.status === "False");
    if (!c) continue;
    const key = `(${c.reason}) ${c.message}${c.lastTransitionTime ? ` [since ${c.lastTransitionTime}]` : ""}`;
    append(byFault, key, e.engine);
  }
  return [...byFault].map(([fault, engines]) => `NodeReachable=False for ${engines.join(", ")} ${fault}`);
}

/** The lines above the table: each fact about the whole state directory said once. */
export function headerLines(view: StatusView): string[] {
  const lines: string[] = [];
  if (view.controller) lines.push(controllerLine(view.controller));
  if (view.desired?.problem) lines.push(view.desired.problem);
  // Nothing recorded runs: there was nothing to check, and the controller line already says who observes.
  lines.push(...unreachableLines(view));
  if (view.checked && view.checked.engines > 0) {
    const checked = `checked ${view.checked.engines} engine${view.checked.engines === 1 ? "" : "s"} just now`;
    lines.push(view.controller?.running === false ? `no controller is running; ${checked}` : checked);
  }
  return lines;
}

function table(view: StatusView, now: number, paint: Paint): string[] {
  // A view built without reading desired/ (the report after `reconcile --once`, which has just applied it) has no DESIRED column.
  const withDesired = view.desired !== null;
  const head = [
    "ENGINE",
    "PHASE",
    "AGE",
    "LIVE",
    ...(withDesired ? ["DESIRED"] : []),
    "APPLIED",
    "RUNNING",
    "OBSERVED",
    "GROUP",
    "PID/CONTAINER",
    "ATTEMPTS",
    "LAST ERROR",
  ];
  const rows = [head];
  for (const e of view.engines) {
    const proc = e.pid !== null ? String(e.pid) : short(e.container_id);
    rows.push([
      e.engine,
      e.phase + (e.suspended_since ? " SUSPENDED" : ""),
      since(phaseSince(e), now),
      liveCell(e.live),
      ...(withDesired ? [desiredCell(e, view.desired)] : []),
      short(e.applied_hash),
      short(e.running_hash),
      age(e.observed_at, now),
      short(e.group_signature, 16),
      proc + (e.retiring ? " (retiring)" : ""),
      String(e.attempts),
      e.last_error ? `${e.last_error.step ?? ""}: ${e.last_error.message}`.split("\n")[0]!.slice(0, 80) : "-",
    ]);
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  // Painted after padding: escape sequences take no columns.
  const painted = (r: string[], row: number) => (c: string, i: number) => {
    if (row === 0) return c;
    const e = view.engines[row - 1]!;
    if (i === 1) return phaseColour(e.phase, paint)(c);
    if (i === 3 && e.live && e.live.liveness !== "alive") return paint.bad(c);
    if (i === r.length - 1 && e.last_error) return paint.bad(c);
    return c;
  };
  return rows.map((r, row) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
      .map(painted(r, row))
      .join("  "),
  );
}

/** Where the operator reads the engine's own log: a container's is the daemon's, a native engine's is in its run directory. */
export function engineLogWhere(e: Pick<StatusEngine, "run_dir" | "handle">): string | null {
  const h = e.handle;
  if (h?.kind === "container")
    return `docker logs ${h.container_id.slice(0, 12)} on the engine's node (copied into the run directory as engine.log when it fails)`;
  if (!e.run_dir) return null;
  return `${e.run_dir}/engine.log${h?.kind === "native" && h.node ? ` (node ${h.node}: that run directory on the node)` : ""}`;
}

function details(e: StatusEngine, view: StatusView, now: number): string[] {
  const lines = [
    "",
    `${e.engine}:`,
    `  phase:         ${e.phase} for ${since(phaseSince(e), now)}`,
    `  run directory: ${e.run_dir ?? "-"}`,
    `  engine log:    ${engineLogWhere(e) ?? "- (no run yet)"}`,
    `  plan sha256:   ${e.plan_sha256 ?? "-"}`,
  ];
  if (e.launcher)
    lines.push(
      `  launcher:      narwhal ${e.launcher.version}, digest ${e.launcher.digest} ` +
        (e.launcher.current
          ? "(this narwhal's)"
          : "(not this narwhal's: a changed launcher requires a new prepared run, so the next reconcile replaces it)"),
    );
  const desired = !view.desired
    ? []
    : [`desired ${view.desired.valid ? (e.desired_hash_now ?? "- (not in desired/)") : "?"}`];
  const hashes = [
    ...desired,
    `applied ${e.applied_hash ?? "-"}`,
    `running ${e.running_hash ?? "-"}${e.retiring ? " (retiring)" : ""}`,
  ];
  lines.push(
    ...hashes.map((h, i) => `${i === 0 ? "  input hash:    " : "                 "}${h}`),
    `  observed:      ${e.observed_at ? `${age(e.observed_at, now)} (${e.observed_at})` : "never by a controller"}`,
  );
  if (e.live) lines.push(`  checked now:   ${liveCell(e.live)}`);
  if (e.suspended_since)
    lines.push(`  suspended:     since ${e.suspended_since}: observed, never changed (narwhal resume ${e.engine})`);
  for (const c of e.conditions)
    lines.push(
      `  ${c.type}=${c.status} (${c.reason}) ${c.message}${c.lastTransitionTime ? ` [since ${c.lastTransitionTime}]` : ""}`,
    );
  if (e.layout)
    lines.push(
      `  cache layout: ${e.layout.num_gpu_blocks} blocks × ${e.layout.block_size} tokens, ${e.layout.gpu_kv_cache_tokens} tokens; matches group: ${e.layout_matches_group}`,
    );
  const att = e.layout?.attestation;
  if (att)
    lines.push(
      `  attestation:  ${att.url} served by pid ${att.sidecar_pid} on node ${att.node}, bound to this engine (checked ${att.checked_at})`,
    );
  if (e.last_error)
    lines.push(`  last error: ${e.last_error.message}${e.last_error.fix ? `\n  fix: ${e.last_error.fix}` : ""}`);
  lines.push("  history:");
  for (const h of e.history.slice(-10))
    lines.push(`    ${h.at} ${h.from} → ${h.to}${h.note ? ` (${h.note.split("\n")[0]})` : ""}`);
  return lines;
}

/** A pair's line: proven, failed with its cause, or no longer current. */
function pairLine(p: StatusView["pairs"][number], now: number): string {
  const verdict = !p.current
    ? `not proven for the engines running now (last ${p.passed ? "proven" : `failed: ${p.cause}`} ${age(p.at, now)})`
    : p.passed
      ? `proven ${age(p.at, now)}`
      : `FAILED (${p.cause}${p.source === "watch" ? ", found by the metrics scrape" : ""}) ${age(p.at, now)}: ${p.message}`;
  return `  ${p.prefill} → ${p.decode}  ${verdict}`;
}

/**
 * The recorded prefill → decode pairs: one engine's (`status ENGINE`) a line each; the fleet's as counts, and a
 * line for each pair of two running engines that is not proven now (failed, or proven for an earlier instance).
 * Every prefill of a pairing class pairs with every decode of it, so a fleet's pairs grow as the square of its
 * engines (64 at 16 engines, 3984 at 1000 in pools of 16), and a line for each buried the few that need the
 * operator; the pairs of engines that do not run (down, or gone from the fleet: their proofs stay recorded)
 * are counted, not listed, or a stopped fleet would print them all again.
 */
function pairLines(view: StatusView, now: number, detail: boolean): string[] {
  const pairs = view.pairs;
  if (pairs.length === 0) return [];
  if (detail) return ["", "KV transfer (prefill → decode):", ...pairs.map((p) => pairLine(p, now))];
  const runs = new Set(view.engines.filter((e) => e.handle).map((e) => e.engine));
  const proven: typeof pairs = [];
  const notProven: typeof pairs = [];
  for (const p of pairs) (p.current && p.passed ? proven : notProven).push(p);
  const listed = notProven.filter((p) => runs.has(p.prefill) && runs.has(p.decode));
  const idle = notProven.length - listed.length;
  const oldest = proven.reduce<string | null>((o, p) => (o === null || p.at < o ? p.at : o), null);
  const hint = "(`narwhal status ENGINE` lists an engine's)";
  const summary =
    pairs.length === 1 && proven.length === 1
      ? `1 pair, proven for the engines running now ${age(oldest, now)}`
      : proven.length === pairs.length
        ? `${pairs.length} pairs, all proven for the engines running now, the oldest proof ${age(oldest, now)} ${hint}`
        : [
            `${pairs.length} pair${pairs.length === 1 ? "" : "s"}: ${proven.length} proven for the engines running now`,
            ...(idle ? [`, ${idle} of engines not running now ${hint}`] : []),
            ...(listed.length ? ["; not proven now:"] : []),
          ].join("");
  return ["", `KV transfer (prefill → decode): ${summary}`, ...listed.map((p) => pairLine(p, now))];
}

export function renderStatusText(view: StatusView, detail: boolean, now = Date.now(), paint: Paint = plain): string {
  const lines = [...headerLines(view), ...table(view, now, paint), ...pairLines(view, now, detail)];
  if (detail) for (const e of view.engines) lines.push(...details(e, view, now));
  return lines.join("\n");
}
