#!/usr/bin/env node
// `narwhal`: the command line. This file is the single error boundary: every
// command returns an exit code or throws, and only here do errors become codes.
import { Command, Option } from "commander";
import { validateDesired } from "../desired/load.js";
import { explainImageTags } from "./image-tags.js";
import { readState } from "../state/store.js";
import { groupReport, renderGroups } from "../controller/groups.js";
import { EXIT, reportError } from "./exit-codes.js";
import { cliOutput } from "./output.js";
import { configFrom, loggerFor, type GlobalOptions } from "./runtime.js";
import { reconcileOnce, reconcileWatch } from "./reconcile.js";
import { readStatus } from "./status-read.js";
import { renderStatusText } from "./status-render.js";
import { down } from "./down.js";
import { engineCommand } from "./engine/command.js";
import { appIdentity } from "../app.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { planCommand } from "./plan.js";
import { applyCommand, readPlanForApply } from "./apply.js";
import type { ValidationIssue } from "../errors.js";
import { completionCommand } from "./completion.js";
import { metricsAddressFlag, metricsAddressHelp, metricsAddressOption } from "../metrics/address.js";

const output = cliOutput();
const { out, err } = output;

/**
 * Commands that act log to the console, and to the state directory's narwhal.log once they hold
 * its lock (the controller and `down` call log.recordTo); the logger is flushed however they end.
 */
async function withLogger(opts: GlobalOptions, fn: (config: Config, log: Logger) => Promise<number>): Promise<number> {
  const config = configFrom(opts);
  const log = loggerFor(config);
  try {
    return await fn(config, log);
  } finally {
    await log.close();
  }
}

const desiredOpt = () =>
  new Option("--desired <dir>", "desired-state directory (env NARWHAL_DESIRED)").default(undefined, "./desired");
const stateOpt = () => new Option("--state <dir>", "state directory (env NARWHAL_STATE)").default(undefined, "./state");
const formatOpt = () => new Option("--format <format>", "output format").choices(["text", "json"]).default("text");

/** An invalid desired state, as `validate` prints it: every issue with its file and JSON path. */
function printInvalid(dir: string, issues: ValidationIssue[], format: string): void {
  if (format === "json") {
    out(JSON.stringify({ valid: false, issues, engines: [] }, null, 2));
    return;
  }
  err(`desired state in ${dir} is invalid (${issues.length} errors):`);
  for (const i of issues) err(`  ${i.file} ${i.path}: ${i.message} [${i.rule}]`);
}

async function run(argv: string[]): Promise<number> {
  let code: number = EXIT.ok;
  let format = "text";
  const program = new Command("narwhal")
    .description("A declarative reconciler for vLLM inference fleets")
    .version(appIdentity().version, "--version")
    .exitOverride()
    .showHelpAfterError();

  const act =
    (fn: (opts: GlobalOptions & Record<string, unknown>, ...args: unknown[]) => Promise<number>) =>
    async (...args: unknown[]) => {
      const cmd = args[args.length - 1] as Command;
      const opts = cmd.opts() as GlobalOptions & Record<string, unknown>;
      format = opts.format ?? "text";
      code = await fn(opts, ...args.slice(0, -2));
    };

  program
    .command("validate")
    .description("Validate desired/ and print every error with its file and JSON path (exit 0 valid, 1 invalid)")
    .addOption(desiredOpt())
    .addOption(formatOpt())
    .action(
      act(async (opts) => {
        const config = configFrom(opts);
        const result = await validateDesired(config.desiredDir);
        const issues = await explainImageTags(result, config);
        if (opts.format === "json") {
          out(JSON.stringify({ valid: !!result.state, issues, engines: result.state?.specs ?? [] }, null, 2));
        } else if (result.state) {
          out(`desired state in ${config.desiredDir} is valid: ${result.state.specs.length} engines`);
          for (const s of result.state.specs)
            out(`  ${s.name} (${s.role}, ${s.backend}) ${s.url} input ${s.input_hash.slice(0, 12)}`);
        } else {
          printInvalid(config.desiredDir, issues, String(opts.format));
        }
        return result.state ? EXIT.ok : EXIT.invalid;
      }),
    );

  program
    .command("reconcile")
    .description("Converge engines on desired/; watch for changes and drift until SIGINT/SIGTERM, or --once")
    .option("--once", "converge, then exit 0 when every engine is captured, 2 when not")
    .addOption(desiredOpt())
    .addOption(stateOpt())
    .addOption(formatOpt())
    .option(metricsAddressFlag, metricsAddressHelp)
    .action(
      act((opts) => {
        const metricsAddress = metricsAddressOption(opts);
        return withLogger(opts, (config, log) =>
          opts.once
            ? reconcileOnce(config, log, String(opts.format), out)
            : reconcileWatch(
                { ...config, metrics: { ...config.metrics, address: metricsAddress ?? config.metrics.address } },
                log,
              ),
        );
      }),
    );

  program
    .command("status")
    .description(
      "Show the controller holding the state, and every engine's phase, input hashes (desired/ now, applied, running), when it was last observed " +
        "(checked just now when no controller runs), group, process, conditions, last error and history",
    )
    .argument("[engine]", "one engine, with details")
    .addOption(desiredOpt())
    .addOption(stateOpt())
    .addOption(formatOpt())
    .action(
      act(async (opts, engine) => {
        const config = configFrom(opts);
        const view = await readStatus(config, engine as string | undefined);
        if (engine && view.engines.length === 0) {
          err(
            `narwhal: no engine named ${String(engine)} in the state ${config.stateDir} or in desired state ${config.desiredDir}`,
          );
          return EXIT.invalid;
        }
        out(opts.format === "json" ? JSON.stringify(view, null, 2) : renderStatusText(view, !!engine));
        return EXIT.ok;
      }),
    );

  program
    .command("groups")
    .description("Print cache-equivalence groups (seed 000): signature, representative and roles")
    .addOption(stateOpt())
    .addOption(formatOpt())
    .action(
      act(async (opts) => {
        const groups = groupReport(Object.values((await readState(configFrom(opts).stateDir)).engines));
        out(
          opts.format === "json"
            ? JSON.stringify(groups, null, 2)
            : renderGroups(groups) || "no groups yet: no engine has been inspected",
        );
        return EXIT.ok;
      }),
    );

  program
    .command("down")
    .description("Stop every engine the state knows: gracefully, then SIGKILL")
    .addOption(stateOpt())
    .addOption(formatOpt())
    .action(
      act((opts) =>
        withLogger(opts, async (config, log) => {
          const { stopped } = await down(config, log);
          out(
            opts.format === "json"
              ? JSON.stringify({ stopped })
              : stopped.length
                ? `stopped: ${stopped.join(", ")}`
                : "no engine was running",
          );
          return EXIT.ok;
        }),
      ),
    );

  program
    .command("plan")
    .description("Show what reconcile would do, acting on nothing (exit 0 nothing to do, 2 changes pending, 1 error)")
    .addOption(desiredOpt())
    .addOption(stateOpt())
    .addOption(formatOpt())
    .option("--out <file>", "also save the plan (written 0600) for narwhal apply FILE")
    .action(
      act((opts) =>
        withLogger(opts, async (config, log) => {
          const result = await validateDesired(config.desiredDir);
          if (!result.state) {
            printInvalid(config.desiredDir, await explainImageTags(result, config), String(opts.format));
            return EXIT.invalid;
          }
          return planCommand(
            config,
            log,
            result.state,
            { format: String(opts.format), out: opts.out as string | undefined },
            out,
            err,
          );
        }),
      ),
    );

  program
    .command("apply")
    .description(
      "Execute exactly a saved plan, or refuse (exit 1) when desired or observed state moved since; then as reconcile --once (exit 0 converged, 2 not)",
    )
    .argument("<file>", "a plan written by narwhal plan --out FILE")
    .addOption(new Option("--desired <dir>", "desired-state directory").default(undefined, "the plan's desired_dir"))
    .addOption(new Option("--state <dir>", "state directory").default(undefined, "the plan's state_dir"))
    .addOption(formatOpt())
    .action(
      act(async (opts, file) => {
        // The plan file names the directories it was computed from; an explicit option wins.
        const { file: planFile, saved } = await readPlanForApply(String(file));
        const dirs = { ...opts, desired: opts.desired ?? saved.desired_dir, state: opts.state ?? saved.state_dir };
        return withLogger(dirs, (config, log) => applyCommand(config, log, planFile, saved, String(opts.format), out));
      }),
    );

  completionCommand(program, act, out);

  // `narwhal engine <action>`: the seed's narwhal-engine actions on the same phase functions.
  program.addCommand(engineCommand(act, out, err));

  try {
    await program.parseAsync(argv);
  } catch (e) {
    const ce = e as { code?: string; exitCode?: number };
    if (typeof ce.code === "string" && ce.code.startsWith("commander.")) {
      return ce.code === "commander.helpDisplayed" || ce.code === "commander.version"
        ? EXIT.ok
        : (ce.exitCode ?? EXIT.invalid);
    }
    return reportError(e, format, err);
  }
  return code;
}

// Exit 0 is earned: if the event loop drains while the command is still pending (an operation that
// never settled), Node exits with process.exitCode, and that must not read as success.
process.exitCode = EXIT.invalid;
let finished = false;
process.on("beforeExit", () => {
  if (!finished)
    err(
      "narwhal: internal error: the command stopped before it finished (an operation never settled); nothing it reported can be trusted.",
    );
});

async function main(): Promise<number> {
  let code: number;
  try {
    code = await run(process.argv);
  } catch (e) {
    code = reportError(e, "text", err);
  }
  try {
    await output.flush();
  } catch (e) {
    code = reportError(e, "text", err);
  }
  return code;
}

// The entry point: nothing awaits it. main() does not reject (its catch is the CLI's one error
// boundary and turns every error into an exit code).
void main().then((code) => {
  finished = true;
  process.exit(code);
});
