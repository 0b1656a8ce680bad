// `narwhal logs`'s command line; what it runs (logs.ts: the state, the backends, the hosts) loads only when it runs.
import { InvalidArgumentError, Option, type Command } from "commander";
import { configFrom } from "./config-from.js";
import { exitCodesHelp } from "./exit-codes.js";
import type { RunChoice } from "./logs-source.js";
import { desiredOpt, stateOpt, type Act } from "./options.js";

const count = (what: string) => (v: string) => {
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`${what} must be a whole number (0 or more)`);
  return Number(v);
};

/** Register `narwhal logs` on the program. */
export function registerLogs(program: Command, act: Act, err: (s: string) => void): void {
  program
    .command("logs")
    .description(
      "Print an engine's log: its container's log, or its native engine.log on its node; -f follows it until SIGINT or until the engine is replaced or stopped " +
        "(exit 0 printed or followed to its end, 1 unknown engine, no such run, or the log cannot be read)",
    )
    .argument("<engine>", "the engine (as narwhal status lists it)")
    .option(
      "-f, --follow",
      "keep printing what the engine writes, until SIGINT/SIGTERM or until the engine is replaced, stopped or fails (said on stderr)",
    )
    .addOption(
      new Option(
        "--run <n>",
        "an older run: N runs back from the current one (1 is the previous), or a run directory's name",
      ).conflicts("previous"),
    )
    .addOption(
      new Option(
        "--previous",
        "the run before the current one (a replaced engine, or a failed start kept with its log)",
      ),
    )
    .addOption(new Option("--tail <n>", "only the last N lines").argParser(count("--tail")))
    .addOption(desiredOpt("desired-state directory: the engine's node"))
    .addOption(stateOpt())
    .addHelpText(
      "after",
      exitCodesHelp([
        ["ok", "printed (or followed to its end, or interrupted)"],
        ["invalid", "unknown engine or run, or the log cannot be read"],
      ]),
    )
    .action(
      act(async (opts, engine) => {
        const run = opts.run as string | undefined;
        const choice: RunChoice =
          run === undefined
            ? opts.previous
              ? { back: 1 }
              : {}
            : /^\d+$/.test(run)
              ? { back: Number(run) }
              : { name: run };
        const { logs } = await import("./logs.js");
        return logs(
          configFrom(opts),
          String(engine),
          { follow: !!opts.follow, choice, ...(opts.tail !== undefined ? { tail: opts.tail as number } : {}) },
          err,
        );
      }),
    );
}
