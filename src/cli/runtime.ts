// Wiring shared by the commands: config, logger, backends, controller.
import { loadConfig, type Config } from "../config.js";
import { createLogger, type Logger } from "../log.js";
import { backendsFor, nodeHostsFor } from "../backends/for-config.js";
import { Controller } from "../controller/controller.js";
import { appIdentity, checkScriptPath } from "../app.js";
import { failpoints } from "../failpoints.js";
import type { ControllerObserver } from "../controller/observer.js";

export { backendsFor, nodeHostsFor };

export interface GlobalOptions {
  desired?: string;
  state?: string;
  format?: string;
}

export function configFrom(opts: GlobalOptions): Config {
  return loadConfig({ desired: opts.desired, state: opts.state });
}

/** Console only: the holder of the state lock adds narwhal.log (Logger.recordTo) once it has the lock. */
export function loggerFor(config: Config): Logger {
  return createLogger({ level: config.logLevel, rotation: config.logRotation });
}

export function controllerFor(
  config: Config,
  log: Logger,
  mode: "once" | "watch" = "watch",
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
    ...(observer ? { observer } : {}),
  });
}
