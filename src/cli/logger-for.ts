// The commands' logger, in a module of its own: runtime.ts (the controller's wiring) loads the controller,
// its machines and xstate, which `plan`, `down` and `prune` never run.
import type { Config } from "../config.js";
import { createLogger, type Logger } from "../log.js";

/** Console only: the holder of the state lock adds narwhal.log (Logger.recordTo) once it has the lock. */
export function loggerFor(config: Config, consoleStream?: NodeJS.WritableStream): Logger {
  return createLogger({
    level: config.logLevel,
    rotation: config.logRotation,
    ...(consoleStream ? { consoleStream } : {}),
  });
}
