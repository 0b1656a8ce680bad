// Keeping state/serving-fleet.json in step with the plans: each write is
// chained after the last (never two renames at once), skipped when the fleet
// did not change, and a failed write is logged and tried again by the next plan.
import { describeFailure } from "../errors.js";
import type { Logger } from "../log.js";
import { readServingFleet, writeServingFleet } from "./serving-file.js";
import type { ServingFleet } from "./plan-types.js";

export class ServingWriter {
  /** What the file lists (or is being written to list); null until read or written. */
  current: ServingFleet | null = null;
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly stateDir: string,
    private readonly log: Logger,
    private readonly onWritten?: (fleet: ServingFleet) => void,
  ) {}

  async load(): Promise<void> {
    this.current = await readServingFleet(this.stateDir);
  }

  write(fleet: ServingFleet): void {
    if (JSON.stringify(fleet) === JSON.stringify(this.current)) return;
    this.current = fleet;
    this.chain = this.chain
      .then(() => writeServingFleet(this.stateDir, fleet))
      .then(
        () => this.onWritten?.(fleet),
        (err) => {
          // Not what the file lists: the next plan writes it again.
          if (this.current === fleet) this.current = null;
          this.log.error(`cannot write serving-fleet.json: ${describeFailure(err)}`);
        },
      );
  }

  /** Resolves once every write asked for so far is done (or failed and logged). */
  written(): Promise<void> {
    return this.chain;
  }
}
