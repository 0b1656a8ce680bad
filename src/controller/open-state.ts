// Taking a state directory for a controller: its lock first, then (and only
// then) its log file and its state file. A refused second command touches
// neither; a state file that cannot be opened releases the lock again.
import { ioFailure } from "../errors.js";
import type { Failpoint } from "../failpoints.js";
import type { Logger } from "../log.js";
import { acquireStateLock, type StateLock } from "../state/lock.js";
import { StateStore } from "../state/store.js";

export async function openState(
  stateDir: string,
  log: Logger,
  failpoint?: Failpoint,
  onWrite?: (seconds: number, ok: boolean) => void,
): Promise<{ lock: StateLock; store: StateStore }> {
  let lock: StateLock;
  try {
    lock = await acquireStateLock(stateDir);
  } catch (err) {
    throw ioFailure(err, { step: "state" });
  }
  let store: StateStore;
  try {
    // Only the lock holder writes narwhal.log: a refused second command never touches it.
    log.recordTo(stateDir);
    store = await StateStore.open(stateDir, failpoint, onWrite);
  } catch (err) {
    await lock.release();
    throw ioFailure(err, { step: "state" });
  }
  if (store.movedAside)
    log.warn(`${store.asideReason}; moved aside to ${store.movedAside} and rebuilding from what is observed`);
  if (store.sweptTemps.length)
    log.info(`removed ${store.sweptTemps.length} temp file(s) a killed controller left in ${stateDir}`);
  return { lock, store };
}
