// `narwhal down`: stop every engine the state directory owns (graceful, then
// SIGKILL): each record's live engine and the one it was replacing, and any
// engine this state directory started that no record knows (a start cut short
// by a crash, a lost state file). Records keep their history and run
// directories as evidence. One engine that cannot be stopped does not stop the rest.
// Engines on other nodes are reached through the desired state's node records:
// without them (desired/ missing or invalid) what runs here is stopped and each
// remote engine fails, naming its node.
import { StateStore } from "../state/store.js";
import { acquireStateLock } from "../state/lock.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import type { EngineHandle } from "../phases/types.js";
import { ioFailure, NarwhalError } from "../errors.js";
import { backendsFor, nodeHostsFor } from "../backends/for-config.js";
import { validateDesired } from "../desired/load.js";
import { writeServingFleet } from "../controller/serving-file.js";
import { World } from "../controller/world.js";
import { recordContext, stoppedConditions } from "../controller/record.js";
import { compareNames } from "../controller/in-service.js";

export interface DownResult {
  stopped: string[];
  failed: Array<{ engine: string; error: string }>;
}

export async function down(config: Config, log: Logger): Promise<DownResult> {
  const lock = await acquireStateLock(config.stateDir).catch((err: unknown) => {
    throw ioFailure(err, { step: "state" });
  });
  const result: DownResult = { stopped: [], failed: [] };
  let closeHosts = async () => {};
  try {
    // Only the lock holder writes narwhal.log: a `down` refused the lock leaves the live controller's log alone.
    log.recordTo(config.stateDir);
    const store = await StateStore.open(config.stateDir);
    const hosts = nodeHostsFor(config);
    const backends = backendsFor(config, undefined, hosts, log);
    const desired = await validateDesired(config.desiredDir).catch(() => null);
    if (desired?.state) for (const b of Object.values(backends)) b.knowHosts?.(desired.state.specs);
    else log.warn(`desired state ${config.desiredDir} not loaded: engines on other nodes cannot be reached`);
    closeHosts = () => hosts.close();
    const world = new World(backends, log, config.stopGraceMs, { hosts, stateDir: config.stateDir });
    // A router stops sending before anything is stopped.
    await writeServingFleet(config.stateDir, { group_signature: null, pairing_class: null, engines: [], pairs: [] });
    const stop = async (engine: string, handle: EngineHandle) => {
      try {
        log.info("stopping engine", { engine });
        await world.stop(handle);
        result.stopped.push(engine);
      } catch (err) {
        result.failed.push({ engine, error: (err as Error).message });
        log.error(`cannot stop: ${(err as Error).message}`, { engine });
      }
    };
    // Every engine at once (each waits out its own grace period; one after another, a fleet's down took
    // the sum of them), an engine's own handles in order: its record's, then the one it was replacing.
    const downRecord = async (record: (typeof store.data.engines)[string]) => {
      const retiring = recordContext(record).retiring?.handle ?? null;
      for (const handle of [record.handle, retiring]) if (handle) await stop(record.engine, handle);
      if (result.failed.some((f) => f.engine === record.engine)) return; // keep its record: it still runs
      await store.update(record.engine, (prev) =>
        prev
          ? {
              ...prev,
              phase: "stopped",
              handle: null,
              running_hash: null,
              // The next reconcile starts this engine over in a fresh run directory.
              snapshot: null,
              conditions: stoppedConditions(prev.conditions, new Date().toISOString()),
              history: [
                ...prev.history,
                { at: new Date().toISOString(), from: prev.phase, to: "stopped", event: "down" },
              ],
            }
          : null,
      );
    };
    await Promise.all(Object.values(store.data.engines).map(downRecord));
    // Engines no record knows: everything this state directory still owns now is one.
    // Failed starts' kept containers too: down leaves no container behind.
    await Promise.all((await world.listOwned(true, true)).map(({ owned }) => stop(owned.engine, owned.handle)));
    result.stopped.sort(compareNames); // stopped together: report in name order
    await store.close();
  } finally {
    await closeHosts();
    await lock.release();
  }
  if (result.failed.length) {
    throw new NarwhalError(`could not stop ${result.failed.map((f) => `${f.engine} (${f.error})`).join("; ")}`, {
      step: "stop",
      retryable: true,
      fix: "Inspect the named engines (pid or container id in `narwhal status`) and run `narwhal down` again.",
    });
  }
  return result;
}
