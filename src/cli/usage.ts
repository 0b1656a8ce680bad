// Usage errors: a command line commander cannot parse (an unknown option or command, a missing or
// invalid value, conflicting options) is reported before any command runs — before any file is read
// or written — and exits 1 (EXIT.invalid), with a hint to --help. In --format json|yaml the text is
// replaced by an Error document (exit-codes.ts), so a script reads one format on stderr.
import type { Command } from "commander";
import { UsageError } from "../errors.js";

export const HELP_HINT = "(add --help for the options and exit codes)";

/** `cmd` throws its usage errors to main.ts's boundary instead of exiting, and prints them as `machine` says. */
export function withUsageErrors(cmd: Command, machine: boolean): Command {
  cmd.exitOverride();
  if (machine) cmd.configureOutput({ outputError: () => {} });
  else cmd.showHelpAfterError(HELP_HINT);
  return cmd;
}

/**
 * The settings withUsageErrors gave `parent`, on every command below it: `.command()` copies them
 * to the commands it creates, but a command built apart and added (`narwhal engine`) and its own
 * subcommands keep commander's defaults, which exit the process directly.
 */
export function inheritUsageErrors(parent: Command): void {
  for (const sub of parent.commands) {
    sub.copyInheritedSettings(parent);
    inheritUsageErrors(sub);
  }
}

/** Commander's message ("error: unknown option '--desired'") as a UsageError naming the option or argument. */
export function usageError(message: string): UsageError {
  const text = message.replace(/^error:\s*/, "").trim();
  // The first quoted name is the option, argument or command at fault; an option without its value placeholder.
  const named = /'([^']+)'/.exec(text)?.[1]?.replace(/\s*[<[].*$/, "");
  return new UsageError(text, {
    ...(named ? { input: named } : {}),
    fix: "Correct the command line: run the command with --help for its options, arguments and exit codes.",
  });
}
