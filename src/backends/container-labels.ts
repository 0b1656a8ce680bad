// The labels narwhal puts on everything it creates (DESIGN.md "Interfaces that
// must stay stable"). Containers without these
// labels are never touched.
//
// Ownership is the state directory (io.narwhal.state) and, for a named fleet
// (fleet.json `name`), the fleet (io.narwhal.fleet): two fleets sharing a Docker
// host — even two controllers whose state directories have the same path on
// different machines — never adopt, stop or sweep each other's containers, and
// their names (narwhal-<fleet>-<engine>) do not collide. A container of this
// state directory without a fleet label predates fleet names (or belongs to the
// unnamed fleet): it stays this fleet's, so an upgrade adopts what runs.
import type { PreparedRun } from "../phases/types.js";
import type { LaunchPlan } from "../phases/plan.js";

export const LABEL = {
  engine: "io.narwhal.engine",
  inputHash: "io.narwhal.input-hash",
  token: "io.narwhal.launch-token",
  run: "io.narwhal.run",
  /** Scopes ownership: two controllers with different state directories never adopt each other's containers. */
  state: "io.narwhal.state",
  /** The fleet's name (fleet.json `name`), when it has one. */
  fleet: "io.narwhal.fleet",
  purpose: "io.narwhal.purpose",
} as const;

/**
 * Which fleet a backend acts for: `name` is fleet.json's (undefined: the fleet has none). Not learned
 * yet (a command that loaded no desired state, such as `down` of a broken tree): every container of
 * the state directory, as before fleet names.
 */
export interface FleetScope {
  name: string | undefined;
}

/** An engine container's name: narwhal-<fleet>-<engine>, or narwhal-<engine> for an unnamed fleet. */
export const containerName = (fleet: string | undefined, engine: string): string =>
  fleet === undefined ? `narwhal-${engine}` : `narwhal-${fleet}-${engine}`;

/** Whether a container of this state directory belongs to the fleet (an unlabelled one predates fleet names). */
export function inFleet(labels: Readonly<Record<string, string>>, scope: FleetScope | undefined): boolean {
  const label = labels[LABEL.fleet];
  return scope === undefined || label === undefined || label === scope.name;
}

const fleetLabel = (fleet: string | undefined): Record<string, string> =>
  fleet === undefined ? {} : { [LABEL.fleet]: fleet };

export function engineLabels(
  run: PreparedRun,
  plan: LaunchPlan,
  stateDir: string,
  fleet?: string,
): Record<string, string> {
  return {
    [LABEL.engine]: run.engine,
    [LABEL.inputHash]: plan.input_hash,
    [LABEL.token]: run.launch_token,
    [LABEL.run]: run.dir,
    [LABEL.state]: stateDir,
    ...fleetLabel(fleet),
    [LABEL.purpose]: "engine",
  };
}

/** `token` is the inspection's own (never the run's launch token): cleanup after a deadline finds the container by it. */
export function checkLabels(run: PreparedRun, stateDir: string, token: string, fleet?: string): Record<string, string> {
  return {
    [LABEL.engine]: run.engine,
    [LABEL.token]: token,
    [LABEL.run]: run.dir,
    [LABEL.state]: stateDir,
    ...fleetLabel(fleet),
    [LABEL.purpose]: "check",
  };
}
