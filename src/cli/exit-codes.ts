// The one place errors become exit codes (DESIGN.md "Interfaces that must stay stable").
import { ioFailure, NarwhalError } from "../errors.js";

/**
 * 0 done (converged, or nothing to do); 1 invalid input, refused or internal error; 2 not converged
 * (`reconcile --once`, `apply`) or changes pending (`plan`, as `terraform plan -detailed-exitcode`).
 */
export const EXIT = { ok: 0, invalid: 1, notConverged: 2, changes: 2 } as const;

/**
 * Print an error for an operator and choose the exit code: invalid input, internal errors and
 * failures to persist are 1. A raw file-system error from any command is named by its path and errno.
 */
export function reportError(thrown: unknown, format: string, write: (s: string) => void): number {
  const err = ioFailure(thrown);
  if (format === "json") {
    write(
      JSON.stringify(
        {
          error:
            err instanceof NarwhalError
              ? err.toJSON()
              : { name: "InternalError", message: String((err as Error)?.message ?? err) },
        },
        null,
        2,
      ),
    );
  } else if (err instanceof NarwhalError) {
    write(`narwhal: ${err.describe()}`);
  } else {
    write(`narwhal: internal error: ${(err as Error)?.stack ?? String(err)}`);
  }
  return EXIT.invalid;
}
