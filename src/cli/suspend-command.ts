// `narwhal suspend|resume|retry`'s command lines; what they run (suspend.ts: the state, the lock, the
// request channel) loads only when one runs.
import { Option, type Command } from "commander";
import { configFrom } from "./config-from.js";
import { exitCodesHelp } from "./exit-codes.js";
import type { Kind } from "./suspend.js";
import { desiredOpt, formatOpt, stateOpt, type Act } from "./options.js";

const EXIT_HELP = exitCodesHelp([
  ["ok", "done (or already so)"],
  ["invalid", "an unknown engine, an engine it cannot be done to, or no answer from the running controller in time"],
]);

/** Register suspend, resume and retry on the program. */
export function registerSuspend(program: Command, act: Act, out: (s: string) => void): void {
  const words: Record<Kind, string> = {
    suspend:
      "Suspend engines: observed, never changed (no start, stop, replace, restart, removal, adoption, nor a proof or restart through a P/D partner) until resumed; persisted in the state",
    resume:
      "Resume suspended engines: planned and converged again (one in a backoff retries at its kept deadline, or at once if it passed)",
    retry:
      "Give terminally failed engines a fresh attempt budget, without restarting the controller (a suspended engine is refused: resume it first)",
  };
  for (const kind of ["suspend", "resume", "retry"] as const) {
    const cmd = program
      .command(kind)
      .description(`${words[kind]} (through the running watch-mode controller, or in the state when none runs)`)
      .argument("[engines...]", "engine names (as narwhal status lists them)");
    if (kind !== "retry") cmd.option("--all", "every engine the state or desired/ knows");
    cmd
      .addOption(
        new Option("--timeout <seconds>", "how long to wait for the running controller's answer").default("30"),
      )
      .addOption(desiredOpt())
      .addOption(stateOpt())
      .addOption(formatOpt())
      .addHelpText("after", EXIT_HELP)
      .action(
        act(async (opts, engines) => {
          const { operatorRequest, usage } = await import("./suspend.js");
          const seconds = Number(opts.timeout);
          if (!Number.isFinite(seconds) || seconds <= 0)
            throw usage(
              `--timeout must be a positive number of seconds, not ${String(opts.timeout)}`,
              "--timeout",
              "Give e.g. --timeout 30.",
            );
          return operatorRequest(
            configFrom(opts),
            kind,
            {
              engines: (engines as string[]) ?? [],
              all: !!opts.all,
              timeoutMs: seconds * 1000,
              format: String(opts.format),
            },
            out,
          );
        }),
      );
  }
}
