// Wiring shared by the commands: config, logger, backends, controller.
import type { Config } from "../config.js";
import { createLogger, type Logger } from "../log.js";
import { backendsFor, nodeHostsFor } from "../backends/for-config.js";
import { Controller } from "../controller/controller.js";
import { appIdentity, checkScriptPath } from "../app.js";
import { failpoints } from "../failpoints.js";
import type { ControllerHooks } from "../controller/controller-options.js";
import type { ControllerObserver } from "../controller/observer.js";

export { backendsFor, nodeHostsFor };
export { configFrom, type GlobalOptions } from "./config-from.js";

/** Console only: the holder of the state lock adds narwhal.log (Logger.recordTo) once it has the lock. */
export function loggerFor(config: Config, consoleStream?: NodeJS.WritableStream): Logger {
  return createLogger({
    level: config.logLevel,
    rotation: config.logRotation,
    ...(consoleStream ? { consoleStream } : {}),
  });
}

export function controllerFor(
  config: Config,
  log: Logger,
  mode: "once" | "watch" = "watch",
  hooks?: ControllerHooks,
  observer?: ControllerObserver,
): Controller {
  const failpoint = failpoints(config.failpoints);
  const hosts = nodeHostsFor(config);
  return new Controller({
    config,
    log,
    app: appIdentity(),
    scriptPath: checkScriptPath(),
    backends: backendsFor(config, failpoint, hosts, log),
    hosts,
    failpoint,
    mode,
    ...(hooks ? { hooks } : {}),
    ...(observer ? { observer } : {}),
  });
}
