// Engines that share one GPU (a `shared_device` block) start together through
// the start-shared path (seed 001), with its budget checks and readings,
// instead of one by one: each one's start step waits here until every sharing
// engine that is not already running has asked (or a short wait passes), then
// one startShared() launches them in sequence and hands each its engine.
import type { EngineSpec } from "../desired/types.js";
import type { HostAccess } from "../hosts/types.js";
import type { EngineHandle, PreparedRun } from "../phases/types.js";
import { start, type StartOptions } from "../phases/start.js";
import { startShared } from "../phases/start-shared.js";
import { PhaseError, NarwhalError, inStep } from "../errors.js";
import type { Logger } from "../log.js";
import { wasStarted } from "../phases/checked-run.js";
import { readVerifiedPlan } from "../phases/plan-binding.js";
import type { NodeSlots } from "./node-slots.js";

interface Request {
  spec: EngineSpec;
  run: PreparedRun;
  opts: StartOptions;
  resolve(handle: EngineHandle): void;
  reject(err: unknown): void;
}

export interface SharedStartsDeps {
  /** The desired engines now. */
  specs(): EngineSpec[];
  /** The engine has a live engine of its own (it will not ask to start). */
  running(engine: string): boolean;
  log: Logger;
  /** How long the first engine of a group waits for the others to be checked. */
  waitMs: number;
  /** How to reach a node: a shared start checks listeners and reads GPU memory on the GPUs' own node. */
  host(node: string): HostAccess;
  /** The node's start slots: a start holds one; a sharing group's launch holds one for all of it. */
  slots: NodeSlots;
}

export const sharedKey = (spec: EngineSpec): string | null =>
  spec.launch.shared_device ? `${spec.node.name}/${spec.launch.shared_device.gpu_uuid}` : null;

export class SharedStarts {
  private readonly waiting = new Map<string, Request[]>();
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(private readonly deps: SharedStartsDeps) {}

  start(spec: EngineSpec, run: PreparedRun, opts: StartOptions): Promise<EngineHandle> {
    const key = sharedKey(spec);
    if (!key) return this.slotted(spec, opts, () => start(run, opts));
    return new Promise<EngineHandle>((resolve, reject) => {
      const request: Request = { spec, run, opts, resolve, reject };
      const list = (this.waiting.get(key) ?? []).filter((r) => r.spec.name !== spec.name);
      this.waiting.set(key, [...list, request]);
      opts.signal.addEventListener("abort", () => this.withdraw(key, request), { once: true });
      this.evaluate(key);
    });
  }

  /** `work` holding one of the engine's node's slots; the wait for one, when there is a wait, is told as the step's. */
  private slotted<T>(spec: EngineSpec, opts: StartOptions, work: () => Promise<T>): Promise<T> {
    return this.deps.slots.run(spec.node.name, opts.signal, work, opts.waits);
  }

  private withdraw(key: string, request: Request): void {
    const list = this.waiting.get(key) ?? [];
    if (!list.includes(request)) return;
    this.waiting.set(
      key,
      list.filter((r) => r !== request),
    );
    request.reject(request.opts.signal.reason);
  }

  /** Launch once every sharing engine that is not running has asked; otherwise after the wait. */
  private evaluate(key: string): void {
    const asked = new Set((this.waiting.get(key) ?? []).map((r) => r.spec.name));
    const outstanding = this.deps
      .specs()
      .filter((s) => sharedKey(s) === key && !asked.has(s.name) && !this.deps.running(s.name));
    if (outstanding.length === 0) return this.launch(key);
    if (!this.timers.has(key)) {
      this.deps.log.info(
        `waiting up to ${this.deps.waitMs} ms for ${outstanding.map((s) => s.name).join(", ")} to share ${key}`,
      );
      this.timers.set(
        key,
        setTimeout(() => this.launch(key), this.deps.waitMs),
      );
    }
  }

  /** Launch the group's waiting requests now; every one of them is settled, whatever fails. */
  private launch(key: string): void {
    clearTimeout(this.timers.get(key));
    this.timers.delete(key);
    const all = this.waiting.get(key) ?? [];
    this.waiting.delete(key);
    // Not awaited: called from a Promise executor (start) and a timer, neither of which can wait.
    // launchAll settles each request itself; anything that escapes it rejects every request here
    // (settling one twice is a no-op), so no engine's start step waits for an answer that never comes.
    void this.launchAll(key, all).catch((err: unknown) => {
      for (const r of all) r.reject(inStep(err, r.spec.name, "start"));
    });
  }

  private async launchAll(key: string, all: Request[]): Promise<void> {
    // A run whose engine was already started (a controller killed mid-start) is adopted by the
    // plain start's ensure; start-shared only takes unused plans.
    const batch: Request[] = [];
    for (const r of all) {
      if (await wasStarted(r.run.dir, r.spec)) {
        // Not awaited, so the rest of the group is not held up by this one; its outcome settles its request.
        void this.slotted(r.spec, r.opts, () => start(r.run, r.opts)).then(r.resolve, r.reject);
        continue;
      }
      // start-shared re-reads each plan from its directory; bind it to the state's hash first, as start does.
      const refused = await readVerifiedPlan(r.run, "start").then(
        () => null,
        (err: unknown) => err,
      );
      if (refused) r.reject(refused);
      else batch.push(r);
    }
    if (batch.length === 0) return;
    if (batch.length === 1) {
      // The others already run (or never came): a single start; the desired-state rules already bound the budget.
      const [r] = batch;
      return this.slotted(r!.spec, r!.opts, () => start(r!.run, r!.opts)).then(r!.resolve, r!.reject);
    }
    // A stable launch order (by engine name), whatever order the engines were checked in.
    batch.sort((a, b) => a.spec.name.localeCompare(b.spec.name));
    const first = batch[0]!;
    try {
      // Gathered first, then one slot for the whole launch: a group never holds a slot while it waits.
      const result = await this.slotted(first.spec, first.opts, () =>
        startShared(
          batch.map((r) => r.run.dir),
          // One key is one node and GPU (sharedKey): every member runs on first's node.
          { ...first.opts, env: {}, host: this.deps.host(first.spec.node.name) },
        ),
      );
      for (const r of batch) {
        const record = result.records.find((x) => x.engine === r.spec.name);
        if (record?.identity) r.resolve(record.identity.handle);
        else
          r.reject(
            new PhaseError(r.spec.name, "start", "start-shared reported no engine for this plan", { retryable: true }),
          );
      }
    } catch (err) {
      const retryable = err instanceof NarwhalError ? err.retryable : true;
      for (const r of batch) {
        r.reject(
          new PhaseError(
            r.spec.name,
            "start",
            `shared start of ${batch.map((b) => b.spec.name).join(", ")} on ${key} failed: ${err instanceof Error ? err.message : String(err)}`,
            {
              retryable,
              input: "shared_device",
              fix:
                err instanceof NarwhalError && err.fix
                  ? err.fix
                  : "Read shared-start.json in each run directory for the readings and the cause.",
            },
          ),
        );
      }
    }
  }
}
