// Watch mode's Prometheus metrics: one registry per controller run (never
// prom-client's global default, so two controllers in one process, as tests run
// them, never share counters). Counters and histograms are fed through the
// controller's observer interface; the gauges (engines by phase and condition,
// work-queue depth) are read from the controller at each scrape, so they can
// never drift from the state the controller holds.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { engineMachine } from "../../machines/engine.js";
import type { ControllerObserver } from "../controller/observer.js";
import type { EngineRecord } from "../state/store.js";
import type { StepProgress } from "../phases/progress.js";

/** What the gauges read at each scrape. */
export interface MetricsSource {
  /** The engines the state records. */
  records(): readonly EngineRecord[];
  /** Work-queue keys waiting, running, and scheduled for later (backoff). */
  queueDepth(): { pending: number; running: number; delayed: number };
}

/** Every phase an engine can be in: each is exported (0 when empty), so an alert on one needs no absent(). */
const PHASES = Object.keys(engineMachine.root.states);

/** Step durations run from milliseconds (prepare) to the readiness wait of a large model (start, minutes). */
const STEP_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200];
const FAST_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export interface Liveness {
  alive: boolean;
  /** Why, in one line, for /healthz's body. */
  why: string;
}

export class ControllerMetrics implements ControllerObserver {
  readonly registry = new Registry();
  private source: MetricsSource | null = null;
  private readonly startedAt: number;
  /** When the last fleet reconcile (the observe → plan loop) ended, and whether it failed. */
  private lastLoop: { at: number; ok: boolean } | null = null;
  private readonly transitions: Counter<"from" | "to">;
  private readonly steps: Histogram<"step" | "result">;
  private readonly failures: Counter<"step" | "reason">;
  private readonly proofs: Counter<"result">;
  private readonly reconciles: Histogram<"kind" | "result">;
  private readonly writes: Histogram<"result">;

  /** `aliveWithinMs`: /healthz is 200 while the loop last ended (or the run began) at most this long ago. */
  constructor(
    private readonly aliveWithinMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.startedAt = now();
    const registers = [this.registry];
    const source = () => this.source;
    new Gauge({
      name: "narwhal_engines",
      help: "Engines the state records, by phase",
      labelNames: ["phase"],
      registers,
      collect() {
        const records = source()?.records() ?? [];
        for (const phase of new Set([...PHASES, ...records.map((r) => r.phase)]))
          this.set({ phase }, records.filter((r) => r.phase === phase).length);
      },
    });
    new Gauge({
      name: "narwhal_engine_conditions",
      help: "Engines the state records, by condition type and status",
      labelNames: ["type", "status"],
      registers,
      collect() {
        this.reset();
        for (const r of source()?.records() ?? [])
          for (const c of r.conditions) this.inc({ type: c.type, status: c.status });
      },
    });
    new Gauge({
      name: "narwhal_work_queue_depth",
      help: "Controller work-queue keys: waiting (pending), running, or scheduled for later (delayed, backoff)",
      labelNames: ["state"],
      registers,
      collect() {
        const depth = source()?.queueDepth() ?? { pending: 0, running: 0, delayed: 0 };
        for (const [state, n] of Object.entries(depth)) this.set({ state }, n);
      },
    });
    this.transitions = new Counter({
      name: "narwhal_transitions_total",
      help: "Engine transitions persisted, by the phase left and the phase entered",
      labelNames: ["from", "to"],
      registers,
    });
    this.steps = new Histogram({
      name: "narwhal_step_duration_seconds",
      help: "Duration of engine steps (inspect, prepare, check, start, probe, capture, stop), by result",
      labelNames: ["step", "result"],
      buckets: STEP_BUCKETS,
      registers,
    });
    this.failures = new Counter({
      name: "narwhal_step_failures_total",
      help: "Failed engine steps, by step and reason (the error's class, or a node's access reason)",
      labelNames: ["step", "reason"],
      registers,
    });
    this.proofs = new Counter({
      name: "narwhal_kv_proofs_total",
      help: "KV-transfer proofs of prefill → decode pairs, by result (passed, or the cause of the failure)",
      labelNames: ["result"],
      registers,
    });
    this.reconciles = new Histogram({
      name: "narwhal_reconcile_duration_seconds",
      help: "Work-queue runs: fleet (observe and plan), engine (execute its actions), kv-watch (scrape decodes)",
      labelNames: ["kind", "result"],
      buckets: FAST_BUCKETS,
      registers,
    });
    this.writes = new Histogram({
      name: "narwhal_state_write_duration_seconds",
      help: "State writes (each an append to state/narwhal.journal, fdatasynced), by result",
      labelNames: ["result"],
      buckets: FAST_BUCKETS,
      registers,
    });
  }

  /** The controller the gauges read (set once it exists; until then they read an empty fleet). */
  watch(source: MetricsSource): void {
    this.source = source;
  }

  transition(_engine: string, from: string, to: string): void {
    this.transitions.inc({ from, to });
  }

  /** An ended engine step, timed; a proof's end is counted by kvProof (its own counter), its waits are the view's. */
  step(_engine: string, p: StepProgress): void {
    if (p.kind !== "end" || p.step === "kv-proof") return;
    const { step, seconds, failure } = p;
    this.steps.observe({ step, result: failure ? "failed" : "ok" }, seconds);
    if (failure) this.failures.inc({ step, reason: failure.reason });
  }

  kvProof(result: string): void {
    this.proofs.inc({ result });
  }

  reconciled(kind: "fleet" | "engine" | "kv-watch", seconds: number, ok: boolean): void {
    this.reconciles.observe({ kind, result: ok ? "ok" : "failed" }, seconds);
    if (kind === "fleet") this.lastLoop = { at: this.now(), ok };
  }

  stateWritten(seconds: number, ok: boolean): void {
    this.writes.observe({ result: ok ? "ok" : "failed" }, seconds);
  }

  /**
   * The controller loop is alive when its last fleet reconcile ended within aliveWithinMs (the
   * resync timer asks for one every resync period, and a failed one is retried at most that far
   * apart): a loop hung in an await (a daemon or an ssh node that never answers) is not.
   */
  liveness(): Liveness {
    const limit = `${Math.round(this.aliveWithinMs / 1000)} s`;
    const now = this.now();
    if (!this.lastLoop) {
      const since = Math.round((now - this.startedAt) / 1000);
      return now - this.startedAt <= this.aliveWithinMs
        ? { alive: true, why: `starting: no reconcile loop has ended yet (${since} s since start, limit ${limit})` }
        : { alive: false, why: `no reconcile loop has ended in the ${since} s since start (limit ${limit})` };
    }
    const ago = Math.round((now - this.lastLoop.at) / 1000);
    const outcome = this.lastLoop.ok ? "ended" : "failed (retried with backoff)";
    return now - this.lastLoop.at <= this.aliveWithinMs
      ? { alive: true, why: `the last reconcile loop ${outcome} ${ago} s ago (limit ${limit})` }
      : { alive: false, why: `the last reconcile loop ${outcome} ${ago} s ago, over the limit of ${limit}` };
  }
}
