// Errors of the operator actions (`narwhal engine <action>`): like PhaseError,
// but named by the action the operator ran, with the run directory at fault.
import { NarwhalError, type ErrorDetails } from "../errors.js";

export interface ActionErrorDetails extends Omit<ErrorDetails, "step"> {
  /** The run directory the action refused or failed on. */
  run?: string;
}

export class ActionError extends NarwhalError {
  readonly action: string;
  readonly run?: string;

  constructor(action: string, message: string, details: ActionErrorDetails = {}) {
    const { run, ...rest } = details;
    super(message, rest);
    this.action = action;
    this.run = run;
  }

  /** "engine-1 start-shared: <message> (input: X) Fix: Y" */
  override describe(): string {
    const where = [this.engine, this.action].filter(Boolean).join(" ");
    let line = `${where}: ${this.message}`;
    if (this.input) line += ` (input: ${this.input})`;
    if (this.fix) line += ` Fix: ${this.fix}`;
    return line;
  }

  override toJSON(): Record<string, unknown> {
    return { ...super.toJSON(), action: this.action, run: this.run };
  }
}

/** An action's refusal: the run directory is immutable, or an input is missing, nothing was changed. */
export function refusal(action: string, message: string, details: ActionErrorDetails = {}): ActionError {
  return new ActionError(action, message, { retryable: false, ...details });
}
