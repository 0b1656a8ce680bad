// `narwhal prune`'s command line; what it runs (prune.ts: the state, the backends) loads only when it runs.
import { InvalidArgumentError, Option, type Command } from "commander";
import { EXIT, exitCodesHelp } from "./exit-codes.js";
import { configFrom, type GlobalOptions } from "./config-from.js";

type Act = (
  fn: (opts: GlobalOptions & Record<string, unknown>, ...args: unknown[]) => Promise<number>,
) => (...args: unknown[]) => Promise<void>;

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
    .addOption(
      new Option("--desired <dir>", "desired-state directory: reaches kept containers on other nodes").default(
        undefined,
        "./desired",
      ),
    )
    .addOption(new Option("--state <dir>", "state directory (env NARWHAL_STATE)").default(undefined, "./state"))
    .addOption(new Option("--format <format>", "output format").choices(["text", "json"]).default("text"))
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
        const { loggerFor } = await import("./runtime.js");
        const log = loggerFor(config);
        try {
          const keep = (opts["keep"] as number | undefined) ?? config.keepRuns;
          const result = await prune(config, log, keep, opts["dryRun"] === true);
          out(opts.format === "json" ? JSON.stringify(result, null, 2) : renderText(result));
          return EXIT.ok;
        } finally {
          await log.close();
        }
      }),
    );
}
