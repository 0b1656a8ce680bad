// What every `narwhal engine` action gets: configuration, both backends, the
// scripts it runs in the engine's runtime, and a signal that SIGINT/SIGTERM
// abort (start-shared then cleans up what it started before exiting).
import type { Config } from "../../config.js";
import type { EngineBackend } from "../../backends/types.js";
import type { EngineSpec } from "../../desired/types.js";
import type { AppIdentity } from "../../phases/plan.js";
import { inspectScriptPath } from "../../phases/runtime-inspect.js";
import { appIdentity, checkScriptPath } from "../../app.js";
import { backendsFor } from "../../backends/for-config.js";
import { configFrom } from "../config-from.js";
import { NodeHosts } from "../../hosts/node-hosts.js";

export interface ActionContext {
  config: Config;
  backends: Record<EngineSpec["backend"], EngineBackend>;
  /** The nodes, as a role shell sees them: every node a plan names is this machine. */
  hosts: NodeHosts;
  signal: AbortSignal;
  app: AppIdentity;
  checkScript: string;
  inspectScript: string;
  /** The startup environment (config.startupEnv). */
  env: Readonly<Record<string, string | undefined>>;
}

/** Run `fn` with a context whose signal aborts on SIGINT/SIGTERM. */
export async function withActionContext<T>(
  opts: { state?: string },
  fn: (ctx: ActionContext) => Promise<T>,
): Promise<T> {
  const config = configFrom({ state: opts.state });
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => controller.abort(new Error(`interrupted by ${sig}`));
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  // An engine action runs in the engine's role shell, on its node: the plan's node is this machine.
  const hosts = new NodeHosts({ stateDir: config.stateDir, clientEnv: config.hostEnv, roleShell: true });
  try {
    const checkScript = checkScriptPath();
    return await fn({
      config,
      backends: backendsFor(config, undefined, hosts),
      hosts,
      signal: controller.signal,
      app: appIdentity(),
      checkScript,
      inspectScript: inspectScriptPath(),
      env: config.startupEnv,
    });
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await hosts.close();
  }
}
