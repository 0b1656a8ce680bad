// The two backends, built from a Config: shared by the controller, `down`, `plan` and the engine actions.
import type { Config } from "../config.js";
import type { EngineSpec } from "../desired/types.js";
import { noFailpoints, type Failpoint } from "../failpoints.js";
import { ContainerBackend } from "./container.js";
import { NativeBackend } from "./native.js";
import type { EngineBackend } from "./types.js";

export function backendsFor(
  config: Config,
  failpoint: Failpoint = noFailpoints,
): Record<EngineSpec["backend"], EngineBackend> {
  return {
    native: new NativeBackend({
      stateDir: config.stateDir,
      hostEnv: config.hostEnv,
      logCapBytes: config.engineLogCapBytes,
      failpoint,
    }),
    container: new ContainerBackend({
      stateDir: config.stateDir,
      docker: config.docker,
      stopGraceMs: config.stopGraceMs,
      logCapBytes: config.engineLogCapBytes,
      failpoint,
    }),
  };
}
