// The engine machine: one actor per engine walks it through
// pending → inspected → prepared → checked → started → probed → captured.
// Each state is named for the last step that completed and invokes the next
// one by name; the IO behind those names is supplied by the controller with
// machine.provide({ actors }). Pure: no fs, no http, no docker, no lowdb here.
//
// The context never holds an engine spec (it carries the API key): actors get
// the engine name and the desired input hash, and the controller resolves the
// current spec. So a persisted snapshot is safe to write to disk. The context
// updates that compute something are named pure functions in engine-updates.ts.
import { setup, assign, enqueueActions, fromPromise } from "xstate";
import { toErrorRecord } from "../src/errors.js";
import type {
  CacheLayout,
  CheckResult,
  EngineHandle,
  Inspection,
  PreparedRun,
  ProbeResult,
} from "../src/phases/types.js";
import {
  afterFailure,
  freshAttempt,
  initialContext,
  notWaiting,
  stepInput,
  type EngineContext,
  type EngineEvent,
  type EngineInput,
  type RetryFrom,
  type StepInput,
} from "./engine-context.js";
import {
  capturedUpdate,
  deferredAfter,
  lossUpdate,
  replayOf,
  restoreRetiring,
  resumeAfter,
  restoresRetiring,
  retireForChange,
  retiredUpdate,
} from "./engine-updates.js";

export * from "./engine-context.js";
export * from "./engine-updates.js";

const unprovided = (name: string) =>
  fromPromise<never, StepInput>(async () => {
    throw new Error(`actor "${name}" was not provided`);
  });

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
      const error = toErrorRecord((event as { error?: unknown }).error);
      return { ...afterFailure(context, error, Date.now(), Math.random()), ...resumeAfter(params, error) };
    }),
    /** Hold a desired-state event until the running step settles. */
    defer: assign(({ context, event }) => ({ deferred: deferredAfter(context.deferred, event) })),
    /** Replay what was deferred, now that the step has settled. */
    applyDeferred: enqueueActions(({ context, enqueue }) => {
      if (!context.deferred) return;
      enqueue.assign({ deferred: null });
      const replay = replayOf(context);
      if (replay) enqueue.raise(replay);
    }),
    /** The engine died: a failure of its own (step "observe"), retried from a fresh run with backoff. */
    recordLoss: assign(({ context, event }) =>
      lossUpdate(context, (event as { reason?: string }).reason ?? "exited", Date.now(), Math.random()),
    ),
  },
  guards: {
    deferredRemove: ({ context }) => !!context.deferred?.remove,
    deferredChange: ({ context }) =>
      !!context.deferred?.desiredHash && context.deferred.desiredHash !== context.desiredHash,
    hashChanged: ({ context, event }) => event.type === "DESIRED_CHANGED" && event.desiredHash !== context.desiredHash,
    retiring: ({ context }) => context.retiring !== null,
    retryFrom: ({ context }, params: { from: RetryFrom }) =>
      !context.terminal && !context.suspended && context.retryFrom === params.from,
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
        guard: ({ context, event }) => restoresRetiring(context, event.desiredHash),
        target: ".captured",
        actions: assign(({ context }) => restoreRetiring(context)),
      },
      // A new input hash invalidates everything from inspection on. A running engine is kept as
      // `retiring` until the new plan is checked; then it is stopped and the new one started.
      {
        guard: { type: "hashChanged" },
        target: ".pending",
        actions: assign(({ context, event }) =>
          retireForChange(context, (event as { desiredHash: string }).desiredHash),
        ),
      },
    ],
    REMOVE: { target: ".removing" },
    // Nothing is left to stop or to restore if the desired state reverts.
    RETIRING_LOST: { actions: assign({ retiring: null }) },
    // Kept in context: the backoff timer (state failed) reads it. A step already running is not abandoned.
    SUSPENSION: { actions: assign({ suspended: ({ event }) => event.suspended }) },
  },
  // Every working state takes RESUME by re-entering itself: a snapshot built from observation
  // (controller/adopt.ts), unlike a persisted one, has no running step, and re-entry invokes it.
  states: {
    pending: {
      on: { RESUME: { target: "pending", reenter: true } },
      entry: assign({ ...freshAttempt }),
      invoke: {
        src: "inspect",
        input: stepInput,
        onDone: { target: "inspected", actions: assign({ inspection: ({ event }) => event.output }) },
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "pending" } } },
      },
    },
    inspected: {
      on: { RESUME: { target: "inspected", reenter: true } },
      invoke: {
        src: "prepare",
        input: stepInput,
        onDone: { target: "prepared", actions: assign({ run: ({ event }) => event.output }) },
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "inspected" } } },
      },
    },
    prepared: {
      on: { RESUME: { target: "prepared", reenter: true } },
      invoke: {
        src: "check",
        input: stepInput,
        onDone: [
          {
            guard: { type: "retiring" },
            target: "replacing",
            actions: assign({ checked: ({ event }) => event.output }),
          },
          { target: "checked", actions: assign({ checked: ({ event }) => event.output }) },
        ],
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "prepared" } } },
      },
    },
    checked: {
      // The start is not abandoned halfway: an engine it created must be recorded (and then replaced or removed).
      on: {
        RESUME: { target: "checked", reenter: true },
        DESIRED_CHANGED: { actions: "defer" },
        REMOVE: { actions: "defer" },
      },
      invoke: {
        src: "start",
        input: stepInput,
        onDone: {
          target: "started",
          actions: assign({ handle: ({ event }) => event.output, runningHash: ({ context }) => context.desiredHash }),
        },
        // A run whose engine failed to start is spent: the retry prepares a fresh run directory.
        onError: {
          target: "failed",
          actions: { type: "recordFailure", params: { from: "pending", dropsEngine: true } },
        },
      },
    },
    started: {
      entry: "applyDeferred",
      on: {
        ENGINE_LOST: { target: "failed", actions: { type: "recordLoss" } },
        RESUME: { target: "started", reenter: true },
      },
      invoke: {
        src: "probe",
        input: stepInput,
        onDone: { target: "probed", actions: assign({ probe: ({ event }) => event.output }) },
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "started" } } },
      },
    },
    probed: {
      on: {
        ENGINE_LOST: { target: "failed", actions: { type: "recordLoss" } },
        RESUME: { target: "probed", reenter: true },
      },
      invoke: {
        src: "capture",
        input: stepInput,
        onDone: { target: "captured", actions: assign({ layout: ({ event }) => event.output }) },
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "probed" } } },
      },
    },
    captured: {
      // attempts are kept: a crash-looping engine must exhaust its budget (recordLoss resets it after a stable run).
      entry: assign(() => capturedUpdate(Date.now())),
      on: { ENGINE_LOST: { target: "failed", actions: { type: "recordLoss" } } },
    },
    failed: {
      entry: "applyDeferred",
      on: {
        // A dead engine cannot be probed or captured: resume from a fresh run.
        ENGINE_LOST: { actions: assign({ handle: null, runningHash: null, retryFrom: "pending" }) },
        // An operator's fresh attempt (a new controller run): the budget starts over.
        RETRY: {
          actions: assign({ attempts: 0, terminal: false, ...notWaiting, retryAt: () => Date.now() }),
          reenter: true,
          target: "failed",
        },
        // After a restore: re-arm the backoff timer from the deadline kept in context.
        RESUME: { reenter: true, target: "failed" },
        // A timer that fired while suspended moved nothing (the retryFrom guard): re-entry re-arms it
        // from the kept deadline, so a resumed engine retries then, or at once if the deadline passed.
        SUSPENSION: {
          actions: assign({ suspended: ({ event }) => event.suspended }),
          reenter: true,
          target: "failed",
        },
      },
      after: {
        backoff: [
          { guard: { type: "retryFrom", params: { from: "pending" } }, target: "pending" },
          { guard: { type: "retryFrom", params: { from: "inspected" } }, target: "inspected" },
          { guard: { type: "retryFrom", params: { from: "prepared" } }, target: "prepared" },
          { guard: { type: "retryFrom", params: { from: "checked" } }, target: "checked" },
          { guard: { type: "retryFrom", params: { from: "started" } }, target: "started" },
          { guard: { type: "retryFrom", params: { from: "probed" } }, target: "probed" },
          { guard: { type: "retryFrom", params: { from: "removing" } }, target: "removing" },
        ],
      },
    },
    replacing: {
      // The new plan is checked: stop the engine it replaces, then start the new one. A stop is not
      // abandoned halfway either: a revert that arrives now cannot keep the engine being stopped.
      on: { DESIRED_CHANGED: { actions: "defer" }, REMOVE: { actions: "defer" } },
      invoke: {
        src: "stop",
        input: ({ context }) => ({ ...stepInput({ context }), handle: context.retiring?.handle ?? null }),
        onDone: [
          { guard: "deferredRemove", target: "removed", actions: assign({ ...retiredUpdate }) },
          {
            guard: "deferredChange",
            target: "pending",
            actions: assign(({ context }) => ({ ...retiredUpdate, desiredHash: context.deferred!.desiredHash! })),
          },
          { target: "checked", actions: assign({ ...retiredUpdate }) },
        ],
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "prepared" } } },
      },
    },
    removing: {
      // One stop at a time: a second REMOVE would re-enter and start a concurrent stop; a desired change
      // would abandon the stop halfway. The planner creates the engine anew once it is removed.
      on: { REMOVE: { actions: [] }, DESIRED_CHANGED: { actions: [] } },
      always: { guard: ({ context }) => context.handle === null && context.retiring === null, target: "removed" },
      invoke: {
        // stop ends both the live engine and one being replaced.
        src: "stop",
        input: stepInput,
        onDone: { target: "removed", actions: assign({ handle: null, retiring: null, runningHash: null }) },
        // A stop that failed is retried as a stop, never by running the procedure for an engine nobody wants.
        onError: { target: "failed", actions: { type: "recordFailure", params: { from: "removing" } } },
      },
    },
    removed: { type: "final" },
  },
});

export type EngineMachine = typeof engineMachine;
