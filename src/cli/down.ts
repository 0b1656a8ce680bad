// `narwhal down`: stop every engine the state knows (graceful, then SIGKILL),
// keeping each record's history and run directory as evidence.
import { StateStore } from "../state/store.js";
import { acquireStateLock } from "../state/lock.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { backendsFor } from "./runtime.js";

export async function down(config: Config, log: Logger): Promise<string[]> {
  const lock = await acquireStateLock(config.stateDir);
  const stopped: string[] = [];
  try {
    const store = await StateStore.open(config.stateDir);
    const backends = backendsFor(config);
    for (const record of Object.values(store.data.engines)) {
      if (record.handle) {
        log.info("stopping engine", { engine: record.engine });
        await backends[record.handle.kind].stop(record.handle, config.stopGraceMs);
        stopped.push(record.engine);
      }
      await store.update(record.engine, (prev) =>
        prev
          ? {
              ...prev,
              phase: "stopped",
              handle: null,
              running_hash: null,
              // The next reconcile starts this engine over in a fresh run directory.
              snapshot: null,
              conditions: [{ type: "Ready", status: "False", reason: "Stopped", message: "stopped by narwhal down", at: new Date().toISOString() }],
              history: [...prev.history, { at: new Date().toISOString(), from: prev.phase, to: "stopped", event: "down" }],
            }
          : null,
      );
    }
  } finally {
    await lock.release();
  }
  return stopped;
}
