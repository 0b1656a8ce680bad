// An observation with no controller: `narwhal plan` reads the state file
// without taking the lock and looks at what runs, acting on nothing (no state
// write, no log file, no stop). It probes liveness only: health and keys are
// the running controller's business.
import type { Config } from "../config.js";
import type { DesiredState } from "../desired/types.js";
import type { Logger } from "../log.js";
import { backendsFor, nodeHostsFor } from "../backends/for-config.js";
import { readState } from "../state/store.js";
import { desiredHashes, knownFromRecords, observe } from "./observe.js";
import { InputsFiles } from "../state/applied-inputs.js";
import { readServingFleet } from "./serving-file.js";
import type { Observed } from "./plan-types.js";
import { World } from "./world.js";

export async function observeStandalone(config: Config, log: Logger, desired: DesiredState): Promise<Observed> {
  const hosts = nodeHostsFor(config);
  const backends = backendsFor(config, undefined, hosts);
  for (const backend of Object.values(backends)) backend.knowHosts?.(desired.specs);
  const world = new World(backends, log, config.stopGraceMs);
  try {
    const state = await readState(config.stateDir);
    const inputs = new InputsFiles(config.stateDir);
    const owned = await world.listOwned(false);
    return await observe(world, knownFromRecords(Object.values(state.engines)), [], {
      probe: true,
      key: false,
      health: false,
      owned,
      secrets: desired.secrets,
      inputs: { desiredHash: desiredHashes(desired), read: (value) => inputs.resolve(value) },
      serving: await readServingFleet(config.stateDir),
      proofs: state.proofs ?? {},
      ...(state.suspended ? { suspended: state.suspended } : {}),
    });
  } finally {
    // No SSH master outlives the command (ControlPersist would keep one per node for a minute).
    await hosts.close();
  }
}
