// `narwhal prune`'s command line; what it runs (prune.ts: the state, the backends) loads only when it runs.
import { InvalidArgumentError, Option, type Command } from "commander";
import { EXIT, exitCodesHelp } from "./exit-codes.js";
import { configFrom } from "./config-from.js";
import { isMachineFormat, renderDocument } from "./documents.js";
import { desiredOpt, formatOpt, stateOpt, type Act } from "./options.js";

const count = (v: string) => {
  if (!/^[0-9]+$/.test(v)) throw new InvalidArgumentError("must be a whole number of runs (0 or more)");
  return Number(v);
};

export function registerPruneCommand(program: Command, act: Act, out: (s: string) => void): void {
  program
    .command("prune")
    .description(
      "Remove run directories beyond the newest K per engine, never one the state points to (serving, preparing, failed)",
    )
    .addOption(new Option("--keep <k>", "runs to keep per engine (env NARWHAL_KEEP_RUNS)").argParser(count))
    .option("--dry-run", "print what would be removed, remove nothing")
    .addOption(desiredOpt("desired-state directory: reaches kept containers on other nodes"))
    .addOption(stateOpt())
    .addOption(formatOpt())
    .addHelpText(
      "after",
      exitCodesHelp(
        [
          ["ok", "pruned (or nothing to prune)"],
          ["invalid", "refused (a controller holds the state lock: watch mode prunes by itself) or error"],
        ],
        "A run whose kept container cannot be removed stays, and is listed.",
      ),
    )
    .action(
      act(async (opts) => {
        const config = configFrom(opts);
        const { prune, renderText } = await import("./prune.js");
        const { loggerFor } = await import("./logger-for.js");
        const log = loggerFor(config);
        try {
          const keep = (opts["keep"] as number | undefined) ?? config.keepRuns;
          const result = await prune(config, log, keep, opts["dryRun"] === true);
          const format = opts.format ?? "text";
          out(isMachineFormat(format) ? renderDocument(result, format) : renderText(result));
          return EXIT.ok;
        } finally {
          await log.close();
        }
      }),
    );
}
