// Keeping state/desired-summary.json (src/state/desired-summary.ts) in step with
// the desired state the controller applies: written when a valid desired state
// of another key is applied, each write chained after the last. Only a
// shortcut for `narwhal status`: a failed write is logged, and status then
// validates desired/ itself.
import { describeFailure } from "../errors.js";
import type { Logger } from "../log.js";
import type { DesiredState } from "../desired/types.js";
import { DESIRED_SUMMARY_FILE, writeDesiredSummary } from "../state/desired-summary.js";

export class DesiredSummaryWriter {
  private chain: Promise<void> = Promise.resolve();
  private key: string | null = null;

  constructor(
    private readonly stateDir: string,
    private readonly log: Logger,
  ) {}

  /** A desired state was applied. */
  applied(desired: DesiredState): void {
    const key = desired.source?.key ?? null;
    if (key === null || key === this.key) return;
    this.key = key;
    this.chain = this.chain.then(async () => {
      await writeDesiredSummary(this.stateDir, desired).catch((err: unknown) => {
        this.key = null; // written again with the next desired state applied
        this.log.warn(
          `cannot write ${DESIRED_SUMMARY_FILE} (status validates desired/ instead): ${describeFailure(err)}`,
        );
      });
    });
  }

  /** Resolves once every write asked for so far is done (or failed and logged). */
  written(): Promise<void> {
    return this.chain;
  }
}
