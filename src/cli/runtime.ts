// The controller's wiring (reconcile, apply): config, logger, backends, controller. It loads the controller
// and its machines: a command that only observes or stops takes backends/for-config.ts and logger-for.ts.
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { backendsFor, nodeHostsFor } from "../backends/for-config.js";
import { Controller } from "../controller/controller.js";
import { appIdentity, checkScriptPath } from "../app.js";
import { failpoints } from "../failpoints.js";
import type { ControllerHooks } from "../controller/controller-options.js";
import { fanOut, type ControllerObserver } from "../controller/observer.js";
import { ranStepsTeller } from "./ran-steps.js";

export { backendsFor, nodeHostsFor };
export { configFrom, type GlobalOptions } from "./config-from.js";

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
    observer: fanOut(observer, ranStepsTeller())!,
  });
}
