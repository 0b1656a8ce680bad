// The engine machine: one actor per engine walks it through
// pending → inspected → prepared → checked → started → probed → captured.
// Each state is named for the last step that completed and invokes the next
// one by name; the IO behind those names is supplied by the controller with
// machine.provide({ actors }). Pure: no fs, no http, no docker, no lowdb here.
//
// The context never holds an engine spec (it carries the API key): actors get
// the engine name and the desired input hash, and the controller resolves the
// current spec. So a persisted snapshot is safe to write to disk.
import { setup, assign, fromPromise } from "xstate";
import type { ErrorRecord } from "../src/errors.js";
import type { CacheLayout, CheckResult, EngineHandle, Inspection, PreparedRun, ProbeResult } from "../src/phases/types.js";

export type Phase = "pending" | "inspected" | "prepared" | "checked" | "started" | "probed" | "captured";
export type RetryFrom = Exclude<Phase, "captured">;

export interface RetryPolicy {
  baseMs: number;
  capMs: number;
  maxAttempts: number;
}

/** An engine that served this long before it died is not crash-looping: its restart budget starts over. */
export const STABLE_RUN_MS = 10 * 60_000;

export interface EngineContext {
  engine: string;
  desiredHash: string;
  inspection: Inspection | null;
  run: PreparedRun | null;
  checked: CheckResult | null;
  handle: EngineHandle | null;
  /** Input hash the live engine was prepared from. */
  runningHash: string | null;
  /**
   * The engine being replaced: it keeps serving while the new plan is
   * inspected, prepared and checked, and is stopped just before the new one
   * starts. An invalid or failing new plan therefore never takes it down.
   */
  retiring: Retiring | null;
  probe: ProbeResult | null;
  layout: CacheLayout | null;
  error: ErrorRecord | null;
  /** Where a retry resumes. */
  retryFrom: RetryFrom | null;
  /** Consecutive failures since the engine last reached `captured`. */
  attempts: number;
  /** Backoff deadline (epoch ms); kept in context so it survives a restart. */
  retryAt: number | null;
  /** When the engine last reached `captured` (epoch ms): a crash after a stable run starts a fresh budget. */
  capturedAt: number | null;
  terminal: boolean;
  retry: RetryPolicy;
}

/** The engine a replacement will stop, and what to restore if the desired state reverts to it. */
export interface Retiring {
  handle: EngineHandle;
  run: PreparedRun | null;
  /** The input hash it serves. */
  hash?: string | null;
  /** Its captured evidence, when it had reached `captured`: reverting the desired state resumes it as is. */
  restorable?: Pick<EngineContext, "inspection" | "checked" | "probe" | "layout"> | null;
}

export interface EngineInput {
  engine: string;
  desiredHash: string;
  retry: RetryPolicy;
}

export type EngineEvent =
  | { type: "DESIRED_CHANGED"; desiredHash: string }
  | { type: "REMOVE" }
  | { type: "ENGINE_LOST"; reason: string }
  | { type: "RETRY" }
  | { type: "RESUME" };

/** Inputs the named actors receive (plain data; the controller looks up the spec). */
export interface StepInput {
  engine: string;
  desiredHash: string;
  inspection: Inspection | null;
  run: PreparedRun | null;
  handle: EngineHandle | null;
  retiring: EngineContext["retiring"];
}

const unprovided = (name: string) =>
  fromPromise<never, StepInput>(async () => {
    throw new Error(`actor "${name}" was not provided`);
  });

/** Capped exponential backoff with jitter (50–100% of the step), pure given `random`. */
export function backoffMs(attempts: number, policy: RetryPolicy, random: number): number {
  const step = Math.min(policy.capMs, policy.baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(step * (0.5 + random / 2));
}

function toRecord(err: unknown): ErrorRecord {
  if (err && typeof err === "object" && "toJSON" in err && typeof (err as { toJSON: unknown }).toJSON === "function") {
    const r = (err as { toJSON(): Record<string, unknown> }).toJSON();
    if (typeof r.message === "string") return Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as unknown as ErrorRecord;
  }
  const e = err as { name?: string; message?: string } | undefined;
  return { name: e?.name ?? "Error", message: e?.message ?? String(err), retryable: true };
}

const stepInput = ({ context }: { context: EngineContext }): StepInput => ({
  engine: context.engine,
  desiredHash: context.desiredHash,
  inspection: context.inspection,
  run: context.run,
  handle: context.handle,
  retiring: context.retiring,
});

const freshAttempt = {
  inspection: null,
  run: null,
  checked: null,
  probe: null,
  layout: null,
} as const;

/** A new engine's context: nothing done, nothing running. */
export function initialContext(input: EngineInput): EngineContext {
  return {
    engine: input.engine,
    desiredHash: input.desiredHash,
    ...freshAttempt,
    handle: null,
    runningHash: null,
    retiring: null,
    error: null,
    retryFrom: null,
    attempts: 0,
    retryAt: null,
    capturedAt: null,
    terminal: false,
    retry: input.retry,
  };
}

export const engineMachine = setup({
  types: {
    context: {} as EngineContext,
    events: {} as EngineEvent,
    input: {} as EngineInput,
  },
  actors: {
    inspect: unprovided("inspect") as ReturnType<typeof fromPromise<Inspection, StepInput>>,
    prepare: unprovided("prepare") as ReturnType<typeof fromPromise<PreparedRun, StepInput>>,
    check: unprovided("check") as ReturnType<typeof fromPromise<CheckResult, StepInput>>,
    start: unprovided("start") as ReturnType<typeof fromPromise<EngineHandle, StepInput>>,
    probe: unprovided("probe") as ReturnType<typeof fromPromise<ProbeResult, StepInput>>,
    capture: unprovided("capture") as ReturnType<typeof fromPromise<CacheLayout, StepInput>>,
    stop: unprovided("stop") as ReturnType<typeof fromPromise<void, StepInput>>,
  },
  actions: {
    /** A failed step: record the error and where to resume, and set the backoff deadline. */
    recordFailure: assign(({ context, event }, params: { from: RetryFrom; dropsEngine?: boolean }) => {
      const error = toRecord((event as { error?: unknown }).error);
      const attempts = context.attempts + 1;
      const terminal = !error.retryable || attempts >= context.retry.maxAttempts;
      return {
        error,
        attempts,
        terminal,
        retryFrom: params.from,
        retryAt: terminal ? null : Date.now() + backoffMs(attempts, context.retry, Math.random()),
        ...(params.dropsEngine ? { handle: null, runningHash: null } : {}),
      };
    }),
    /** The engine died: a failure of its own (step "observe"), retried from a fresh run with backoff. */
    recordLoss: assign(({ context, event }) => {
      const reason = (event as { reason?: string }).reason ?? "exited";
      const stable = context.capturedAt !== null && Date.now() - context.capturedAt > STABLE_RUN_MS;
      const attempts = (stable ? 0 : context.attempts) + 1;
      const terminal = attempts >= context.retry.maxAttempts;
      return {
        handle: null,
        runningHash: null,
        error: {
          name: "EngineLost",
          message: `the engine is no longer running: ${reason}`,
          retryable: true,
          engine: context.engine,
          step: "observe" as const,
          fix: "Read engine.log in the run directory for the cause; narwhal restarts the engine from a fresh run with backoff.",
        },
        attempts,
        terminal,
        retryFrom: "pending" as const,
        retryAt: terminal ? null : Date.now() + backoffMs(attempts, context.retry, Math.random()),
      };
    }),
  },
  guards: {
    hashChanged: ({ context, event }) => event.type === "DESIRED_CHANGED" && event.desiredHash !== context.desiredHash,
    retiring: ({ context }) => context.retiring !== null,
    retryFrom: ({ context }, params: { from: RetryFrom }) => !context.terminal && context.retryFrom === params.from,
  },
  delays: {
    backoff: ({ context }) => Math.max(0, (context.retryAt ?? Date.now()) - Date.now()),
  },
}).createMachine({
  id: "engine",
  context: ({ input }) => initialContext(input),
  initial: "pending",
  on: {
    DESIRED_CHANGED: [
      // The desired state went back to what the retiring engine serves: keep it, drop the replacement.
      {
        guard: ({ context, event }) => !!context.retiring?.restorable && event.desiredHash === context.retiring.hash,
        target: ".captured",
        actions: assign(({ context }) => ({
          ...context.retiring!.restorable!,
          desiredHash: context.retiring!.hash!,
          handle: context.retiring!.handle,
          run: context.retiring!.run,
          runningHash: context.retiring!.hash!,
          retiring: null,
          attempts: 0,
        })),
      },
      // A new input hash invalidates everything from inspection on. A running engine is kept as
      // `retiring` until the new plan is checked; then it is stopped and the new one started.
      {
        guard: { type: "hashChanged" },
        target: ".pending",
        actions: assign(({ context, event }) => ({
          desiredHash: (event as { desiredHash: string }).desiredHash,
          retiring: context.handle
            ? {
                handle: context.handle,
                run: context.run,
                hash: context.runningHash,
                restorable: context.layout ? { inspection: context.inspection, checked: context.checked, probe: context.probe, layout: context.layout } : null,
              }
            : context.retiring,
          handle: null,
          attempts: 0,
          error: null,
          terminal: false,
          retryAt: null,
        })),
      },
    ],
    REMOVE: { target: ".removing" },
  },
  // Every working state takes RESUME by re-entering itself: a snapshot built from observation
  // (controller/adopt.ts), unlike a persisted one, has no running step, and re-entry invokes it.
  states: {
    pending: {
      on: { RESUME: { target: "pending", reenter: true } },
      entry: assign({ ...freshAttempt }),
      invoke: { src: "inspect", input: stepInput, onDone: { target: "inspected", actions: assign({ inspection: ({ event }) => event.output }) }, onError: { target: "failed", actions: { type: "recordFailure", params: { from: "pending" } } } },
    },
    inspected: {
      on: { RESUME: { target: "inspected", reenter: true } },
      invoke: { src: "prepare", input: stepInput, onDone: { target: "prepared", actions: assign({ run: ({ event }) => event.output }) }, onError: { target: "failed", actions: { type: "recordFailure", params: { from: "inspected" } } } },
    },
    prepared: {
      on: { RESUME: { target: "prepared", reenter: true } },
      invoke: {
        src: "check",
        input: stepInput,
        onDone: [
          { guard: { type: "retiring" }, target: "replacing", actions: assign({ checked: ({ event }) => event.output }) },
          { target: "checked", actions: assign({ checked: ({ event }) => event.output }) },
        ],
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "prepared" } } },
      },
    },
    checked: {
      on: { RESUME: { target: "checked", reenter: true } },
      invoke: {
        src: "start",
        input: stepInput,
        onDone: { target: "started", actions: assign({ handle: ({ event }) => event.output, runningHash: ({ context }) => context.desiredHash }) },
        // A run whose engine failed to start is spent: the retry prepares a fresh run directory.
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "pending", dropsEngine: true } } },
      },
    },
    started: {
      on: { ENGINE_LOST: { target: "failed", actions: { type: "recordLoss" } }, RESUME: { target: "started", reenter: true } },
      invoke: { src: "probe", input: stepInput, onDone: { target: "probed", actions: assign({ probe: ({ event }) => event.output }) }, onError: { target: "failed", actions: { type: "recordFailure", params: { from: "started" } } } },
    },
    probed: {
      on: { ENGINE_LOST: { target: "failed", actions: { type: "recordLoss" } }, RESUME: { target: "probed", reenter: true } },
      invoke: { src: "capture", input: stepInput, onDone: { target: "captured", actions: assign({ layout: ({ event }) => event.output }) }, onError: { target: "failed", actions: { type: "recordFailure", params: { from: "probed" } } } },
    },
    captured: {
      // attempts are kept: a crash-looping engine must exhaust its budget (recordLoss resets it after a stable run).
      entry: assign({ error: null, retryFrom: null, retryAt: null, terminal: false, capturedAt: () => Date.now() }),
      on: { ENGINE_LOST: { target: "failed", actions: { type: "recordLoss" } } },
    },
    failed: {
      on: {
        // A dead engine cannot be probed or captured: resume from a fresh run.
        ENGINE_LOST: { actions: assign({ handle: null, runningHash: null, retryFrom: "pending" }) },
        // An operator's fresh attempt (a new controller run): the budget starts over.
        RETRY: { actions: assign({ attempts: 0, terminal: false, retryAt: () => Date.now() }), reenter: true, target: "failed" },
        // After a restore: re-arm the backoff timer from the deadline kept in context.
        RESUME: { reenter: true, target: "failed" },
      },
      after: {
        backoff: [
          { guard: { type: "retryFrom", params: { from: "pending" } }, target: "pending" },
          { guard: { type: "retryFrom", params: { from: "inspected" } }, target: "inspected" },
          { guard: { type: "retryFrom", params: { from: "prepared" } }, target: "prepared" },
          { guard: { type: "retryFrom", params: { from: "checked" } }, target: "checked" },
          { guard: { type: "retryFrom", params: { from: "started" } }, target: "started" },
          { guard: { type: "retryFrom", params: { from: "probed" } }, target: "probed" },
        ],
      },
    },
    replacing: {
      // The new plan is checked: stop the engine it replaces, then start the new one.
      invoke: {
        src: "stop",
        input: ({ context }) => ({ ...stepInput({ context }), handle: context.retiring?.handle ?? null }),
        onDone: { target: "checked", actions: assign({ retiring: null, runningHash: null }) },
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "prepared" } } },
      },
    },
    removing: {
      always: { guard: ({ context }) => context.handle === null && context.retiring === null, target: "removed" },
      invoke: {
        // stop ends both the live engine and one being replaced.
        src: "stop",
        input: stepInput,
        onDone: { target: "removed", actions: assign({ handle: null, retiring: null, runningHash: null }) },
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "pending" } } },
      },
    },
    removed: { type: "final" },
  },
});

export type EngineMachine = typeof engineMachine;

/** States in which the engine needs nothing more until an event arrives. */
export function isSettled(value: string, context: EngineContext): boolean {
  return value === "captured" || value === "removed" || (value === "failed" && context.terminal);
}
