// The one place errors become exit codes (DESIGN.md "Interfaces that must stay stable").
import { ioFailure, NarwhalError } from "../errors.js";
import { document, isMachineFormat, renderDocument } from "./documents.js";

/**
 * 0 done (converged, or nothing to do); 1 invalid input, refused or internal error; 2 not converged
 * (`reconcile --once`, `apply`) or changes pending (`plan`, as `terraform plan -detailed-exitcode`).
 */
export const EXIT = { ok: 0, invalid: 1, notConverged: 2, changes: 2 } as const;

/**
 * A command's `--help` line "Exit codes: 0 …; 1 …", its numbers taken from EXIT so help can only name
 * a code the CLI returns (test/cli/help-exit-codes.test.ts walks every command). `more`: a sentence after it.
 */
export function exitCodesHelp(meanings: ReadonlyArray<readonly [keyof typeof EXIT, string]>, more?: string): string {
  return `\nExit codes: ${meanings.map(([code, what]) => `${EXIT[code]} ${what}`).join("; ")}.${more ? `\n${more}` : ""}`;
}

/**
 * The error as a document (kind Error): the fields the text line names — engine, node, step, input,
 * fix — always present (null: not known), whether trying again can help, the exit code, and the
 * error's own details (a validation's issues, a stale plan's differences, a path and errno ...).
 */
export function errorDocument(err: unknown, exitCode: number): Record<string, unknown> {
  const own: Record<string, unknown> =
    err instanceof NarwhalError
      ? err.toJSON()
      : { name: "InternalError", message: String((err as Error)?.message ?? err), retryable: false };
  const { name, message, engine, node, step, action, input, fix, retryable, failure, ...details } = own;
  return document("Error", {
    name,
    message,
    engine: engine ?? null,
    node: node ?? null,
    // An engine action's error is named by the action, where the text line puts the step.
    step: step ?? action ?? null,
    input: input ?? null,
    fix: fix ?? null,
    retryable: retryable ?? false,
    failure: failure ?? "terminal",
    exit_code: exitCode,
    ...details,
  });
}

/**
 * Print an error for an operator (text) or a reader (--format json|yaml: an Error document on
 * stderr) and choose the exit code: invalid input, internal errors and failures to persist are 1.
 * A raw file-system error from any command is named by its path and errno.
 */
export function reportError(thrown: unknown, format: string, write: (s: string) => void): number {
  const err = ioFailure(thrown);
  const code = EXIT.invalid;
  if (isMachineFormat(format)) write(renderDocument(errorDocument(err, code), format));
  else if (err instanceof NarwhalError) write(`narwhal: ${err.describe()}`);
  else write(`narwhal: internal error: ${(err as Error)?.stack ?? String(err)}`);
  return code;
}
