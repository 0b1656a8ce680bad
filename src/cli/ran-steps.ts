// How a command tells the executable (bin.ts) that it ran engine steps, for the V8 code cache it keeps per
// command. A `reconcile` that started, probed or stopped engines compiled every step's functions; one that found
// the fleet converged (a no-op, the run CI repeats) compiled a fifth fewer, and deserialising a cache costs by
// its size: a no-op run with the cache of a cold converge is ~5% slower than with its own. bin.ts and the CLI
// bundle are two programs in one process; a process event is the one channel both see without a global.
import { EventEmitter } from "node:events";
import type { ControllerObserver } from "../controller/observer.js";

export const RAN_STEPS_EVENT = "narwhal:ran-steps";

/** An observer subscriber that tells the event once, at the first step any engine begins. */
export function ranStepsTeller(): Pick<ControllerObserver, "step"> {
  let told = false;
  return {
    step: (_engine, p) => {
      if (told || p.kind !== "begin") return;
      told = true;
      // process.emit's types list node's own events only; the emitter's own emit takes any name.
      EventEmitter.prototype.emit.call(process, RAN_STEPS_EVENT);
    },
  };
}
