// The container backend (Docker Engine API through dockerode) is the next
// piece of work (issue 3). Until it lands, a container record validates but
// its inspect step fails with a clear, terminal reason instead of pretending.
import type { EngineBackend, OwnedEngine, RuntimeCheckOutput } from "./types.js";
import type { EngineSpec } from "../desired/types.js";
import type { EngineHandle } from "../phases/types.js";
import { PhaseError } from "../errors.js";

const unavailable = (engine: string) =>
  new PhaseError(engine, "inspect", "the container backend is not available in this build of narwhal", {
    retryable: false,
    input: "engine-launch.json backend",
    fix: 'Set "backend": "native" for this engine, or use a narwhal build with the container backend.',
  });

export class UnavailableContainerBackend implements EngineBackend {
  readonly kind = "container" as const;
  async runtimeIdentity(spec: EngineSpec): Promise<string> {
    throw unavailable(spec.name);
  }
  async runCheck(): Promise<RuntimeCheckOutput> {
    throw unavailable("engine");
  }
  async ensureStarted(): Promise<EngineHandle> {
    throw unavailable("engine");
  }
  async isAlive(): Promise<boolean> {
    return false;
  }
  async processStartTime(): Promise<number | null> {
    return null;
  }
  async stop(): Promise<void> {}
  async startupLog(): Promise<string> {
    return "";
  }
  async listOwned(): Promise<OwnedEngine[]> {
    return [];
  }
}
