// The two backends, built from a Config: shared by the controller, `down`, `plan` and the engine actions.
// Both reach an engine's node through the one NodeHosts, so a node holds one SSH master connection.
import type { Config } from "../config.js";
import type { EngineSpec } from "../desired/types.js";
import { noFailpoints, type Failpoint } from "../failpoints.js";
import { NodeHosts } from "../hosts/node-hosts.js";
import { ContainerBackend } from "./container.js";
import { NativeBackend } from "./native.js";
import type { EngineBackend } from "./types.js";
import type { Logger } from "../log.js";

/** How this controller reaches the nodes: control sockets under its state directory, its host environment. */
export function nodeHostsFor(config: Config): NodeHosts {
  return new NodeHosts({ stateDir: config.stateDir, clientEnv: config.hostEnv });
}

export function backendsFor(
  config: Config,
  failpoint: Failpoint = noFailpoints,
  hosts: NodeHosts = nodeHostsFor(config),
  /** Where the native orphan sweep reports a node it skipped (unreachable). */
  log?: Logger,
): Record<EngineSpec["backend"], EngineBackend> {
  return {
    native: new NativeBackend({
      stateDir: config.stateDir,
      hostEnv: config.hostEnv,
      logCapBytes: config.engineLogCapBytes,
      hosts,
      failpoint,
      ...(log ? { log } : {}),
    }),
    container: new ContainerBackend({
      stateDir: config.stateDir,
      docker: config.docker,
      stopGraceMs: config.stopGraceMs,
      logCapBytes: config.engineLogCapBytes,
      hosts,
      failpoint,
    }),
  };
}
