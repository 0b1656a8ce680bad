// A suspended engine is observed but never changed (`narwhal suspend`): the planner holds every action
// for it and its machine's backoff timer waits, but a step that was running when the suspension came
// finishes, and the machine's next state invokes its own next step. This gate holds that next step
// before it begins: the step's actor awaits it, and it resolves when the engine's actor is told the
// suspension is lifted (the SUSPENSION event the controller sends on resume), or rejects when the step
// is abandoned (its state exited: an edit, a removal, a stop of the controller).
import type { EngineActor } from "./engine-actors.js";

/** Resolves at once when `actor` is not suspended, else when it is resumed; rejects on `signal`'s abort. */
export function untilResumed(actor: EngineActor | undefined, signal: AbortSignal): Promise<void> {
  if (!actor?.getSnapshot().context.suspended) return Promise.resolve();
  if (signal.aborted) return Promise.reject(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
  return new Promise<void>((resolve, reject) => {
    const done = (settle: () => void) => {
      sub.unsubscribe();
      signal.removeEventListener("abort", aborted);
      settle();
    };
    const aborted = () => done(() => reject(signal.reason instanceof Error ? signal.reason : new Error("aborted")));
    const sub = actor.subscribe({
      next: (snapshot) => {
        if (!snapshot.context.suspended) done(resolve);
      },
      // An actor that stops or fails ends its steps too: nothing is left to hold.
      error: () => done(resolve),
      complete: () => done(resolve),
    });
    signal.addEventListener("abort", aborted, { once: true });
  });
}
