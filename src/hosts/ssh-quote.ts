// OpenSSH sends a command as one string, which the node's shell splits again:
// every argument narwhal passes is quoted so that shell sees exactly it.
import { NarwhalError } from "../errors.js";

/** One argument for a POSIX shell: single-quoted, each ' written as '\'' (nothing is special inside '...'). */
export function shQuote(arg: string): string {
  if (arg.includes("\0")) {
    // No shell and no exec() can carry a NUL inside an argument: refuse rather than cut it short.
    throw new NarwhalError(`an argument for a remote command contains a NUL byte: ${JSON.stringify(arg)}`, {
      retryable: false,
    });
  }
  return `'${arg.replaceAll("'", `'\\''`)}'`;
}

/** argv as one shell command line that runs exactly argv. */
export function shCommand(argv: string[]): string {
  return argv.map(shQuote).join(" ");
}

/** A variable name the shell can export. */
export function isShellName(name: string): boolean {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name);
}
