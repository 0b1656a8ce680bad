// Keeping <state>/engine-launch.local.json (seed 003's NARWHAL_LAUNCH_CONFIG file,
// src/phases/seed-records.ts) in step with the state: rewritten from every engine's
// current run after a prepare or a removal, each write chained after the last (never
// two renames at once). A failed write is logged; the next prepare or removal writes it whole again.
import { describeFailure } from "../errors.js";
import type { Logger } from "../log.js";
import { writeFleetLaunchConfig } from "../phases/seed-records.js";
import type { EngineRecord } from "../state/store.js";

/** Transitions after which an engine's current run (or its presence) may have changed. */
const CHANGES_RUN = new Set(["prepared", "removed"]);

export class LaunchConfigWriter {
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly stateDir: string,
    private readonly log: Logger,
    private readonly records: () => readonly EngineRecord[],
  ) {}

  /** After a persisted transition into `to`. */
  transitioned(to: string): void {
    if (!CHANGES_RUN.has(to)) return;
    this.chain = this.chain.then(async () => {
      // Read when the write runs, not when it was asked for: the latest runs win.
      const runs = this.records().filter((r) => r.phase !== "removed");
      await writeFleetLaunchConfig(this.stateDir, runs).catch((err: unknown) =>
        this.log.error(`cannot write engine-launch.local.json and engine-launch.sources.json: ${describeFailure(err)}`),
      );
    });
  }

  /** Resolves once every write asked for so far is done (or failed and logged). */
  written(): Promise<void> {
    return this.chain;
  }
}
