// `narwhal`: the command line. This file is the single error boundary: every
// command returns an exit code or throws, and only here do errors become codes.
import "./zod-jitless.js"; // first: before any module builds a schema (the file says why)
import { existsSync, realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Command, Option } from "commander";
import { EXIT, exitCodesHelp, reportError } from "./exit-codes.js";
import { cliOutput } from "./output.js";
import { configFrom, type GlobalOptions } from "./config-from.js";
import { liveView } from "./progress-tty.js";
import { renderStatusText } from "./status-render.js";
import { engineCommand } from "./engine/command.js";
import { narwhalVersion } from "../app.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { DesiredStateError, NarwhalError, type ValidationIssue } from "../errors.js";
import { document, formatInArgv, isMachineFormat, listDocument, renderDocument } from "./documents.js";
import { inheritUsageErrors, usageError, withUsageErrors } from "./usage.js";
import { registerSchemaCommand } from "./schema.js";
import { registerPruneCommand } from "./prune-command.js";
import { lazy } from "./lazy.js";
import { desiredOpt, formatOpt, stateOpt } from "./options.js";

// What the commands run, loaded by the command that runs it (lazy.ts): `--help` loads none of it.
const validateDesired = lazy(async () => (await import("../desired/load.js")).validateDesired);
const explainImageTags = lazy(async () => (await import("./image-tags.js")).explainImageTags);
const readState = lazy(async () => (await import("../state/store.js")).readState);
const loggerFor = lazy(async () => (await import("./logger-for.js")).loggerFor);
const reconcileOnce = lazy(async () => (await import("./reconcile.js")).reconcileOnce);
const reconcileWatch = lazy(async () => (await import("./reconcile.js")).reconcileWatch);
const readStatus = lazy(async () => (await import("./status-read.js")).readStatus);
const down = lazy(async () => (await import("./down.js")).down);
const planCommand = lazy(async () => (await import("./plan.js")).planCommand);
const applyCommand = lazy(async () => (await import("./apply.js")).applyCommand);
const readPlanForApply = lazy(async () => (await import("./apply.js")).readPlanForApply);
import { registerLogs } from "./logs-command.js";
import { registerSuspend } from "./suspend-command.js";
import { completionCommand } from "./completion.js";
import { metricsAddressFlag, metricsAddressHelp, metricsAddressOption } from "../metrics/address.js";

const output = cliOutput();
const { out, err } = output;

/**
 * Commands that act log to the console, and to the state directory's narwhal.log once they hold
 * its lock (the controller and `down` call log.recordTo); the logger is flushed however they end.
 */
async function withLogger(
  opts: GlobalOptions,
  fn: (config: Config, log: Logger) => Promise<number>,
  consoleStream?: NodeJS.WritableStream,
): Promise<number> {
  const config = configFrom(opts);
  const log = await loggerFor(config, consoleStream);
  try {
    return await fn(config, log);
  } finally {
    await log.close();
  }
}

/** An invalid desired state, as `validate` prints it: every issue with its file and JSON path. */
function printInvalid(dir: string, issues: ValidationIssue[], format: string): void {
  if (isMachineFormat(format)) {
    out(renderDocument(document("ValidationResult", { valid: false, issues, engines: [] }), format));
    return;
  }
  err(`desired state in ${dir} is invalid (${issues.length} errors):`);
  for (const i of issues) err(`  ${i.file} ${i.path}: ${i.message} [${i.rule}]`);
}

/** Parse `argv` and run its command; with `tree`, only build the command tree and hand it over (nothing runs). */
export async function run(argv: string[], tree?: (program: Command) => void): Promise<number> {
  let code: number = EXIT.ok;
  // Known before commander parses: a usage error in --format json|yaml is a document too.
  let format = formatInArgv(argv) ?? "text";
  const program = withUsageErrors(
    new Command("narwhal").description("A declarative reconciler for vLLM inference fleets"),
    isMachineFormat(format),
  ).version(narwhalVersion(), "--version");
  program.addHelpText(
    "after",
    exitCodesHelp([
      ["ok", "done"],
      ["invalid", "invalid input, refused, or an error (named on stderr)"],
      ["notConverged", "not converged (reconcile --once, apply) or changes pending (plan)"],
    ]),
  );

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
    .addHelpText(
      "after",
      exitCodesHelp([
        ["ok", "valid"],
        ["invalid", "invalid (every issue printed) or unreadable"],
      ]),
    )
    .addOption(desiredOpt())
    .addOption(formatOpt())
    .action(
      act(async (opts) => {
        const config = configFrom(opts);
        const result = await validateDesired(config.desiredDir);
        const issues = await explainImageTags(result, config);
        if (isMachineFormat(opts.format) && result.state) {
          out(
            renderDocument(document("ValidationResult", { valid: true, issues, engines: result.state.specs }), format),
          );
        } else if (result.state) {
          // One write: a line each was a write(2) each, 1000 of them for 1000 engines.
          const lines = result.state.specs.map(
            (s) => `  ${s.name} (${s.role}, ${s.backend}) ${s.url} input ${s.input_hash.slice(0, 12)}`,
          );
          out(
            [`desired state in ${config.desiredDir} is valid: ${result.state.specs.length} engines`, ...lines].join(
              "\n",
            ),
          );
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
    .addHelpText(
      "after",
      exitCodesHelp([
        ["ok", "converged (--once: every engine captured), or watch mode stopped by SIGINT/SIGTERM"],
        ["invalid", "invalid input, the state lock held by another controller, or an error"],
        ["notConverged", "--once ended with an engine not captured (status says why)"],
      ]),
    )
    .action(
      act((opts) => {
        const metricsAddress = metricsAddressOption(opts);
        // On a terminal: one live line per engine in a step, below the log lines (progress-tty.ts).
        const live = liveView(process.stderr);
        return withLogger(
          opts,
          (config, log) =>
            opts.once
              ? reconcileOnce(config, log, String(opts.format), out, live)
              : reconcileWatch(
                  { ...config, metrics: { ...config.metrics, address: metricsAddress ?? config.metrics.address } },
                  log,
                  live,
                ),
          live?.logStream,
        ).finally(() => live?.close());
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
    .option(
      "-w, --watch",
      "show it again every --interval until SIGINT (in place on a terminal; into a pipe, each change once)",
    )
    .option("--interval <seconds>", "seconds between two looks with --watch", "2")
    .option("--no-color", "no colour on a terminal (also NO_COLOR=1)")
    .addHelpText(
      "after",
      exitCodesHelp([
        ["ok", "shown"],
        ["invalid", "an unknown engine, a bad option, or an error"],
      ]),
    )
    .action(
      act(async (opts, engine) => {
        const config = configFrom(opts);
        if (opts.watch) {
          const intervalMs = Number(opts.interval) * 1000;
          if (!(intervalMs > 0))
            throw new NarwhalError(`status --interval ${String(opts.interval)} is not a positive number of seconds`, {
              input: "--interval",
              fix: "Give --interval a number of seconds above 0, e.g. --interval 5.",
              retryable: false,
            });
          const stop = new AbortController();
          const abort = () => stop.abort();
          process.once("SIGINT", abort).once("SIGTERM", abort);
          const { watchStatus } = await import("./status-watch.js");
          const watch = { intervalMs, noColor: opts.color === false, tty: process.stdout, signal: stop.signal };
          await watchStatus(config, { ...watch, ...(engine ? { engine: engine as string } : {}) }, out);
          return EXIT.ok;
        }
        const view = await readStatus(config, engine as string | undefined);
        if (engine && view.engines.length === 0) {
          // Thrown, so --format json|yaml reports it as an Error document: a script can tell it from a status.
          throw new NarwhalError(
            `no such engine in the state ${config.stateDir} or in desired state ${config.desiredDir}`,
            {
              engine: String(engine),
              input: "ENGINE argument",
              fix: "Name an engine of the desired state or the state directory: narwhal status lists them.",
            },
          );
        }
        const { paintFor } = await import("./status-watch.js");
        const paint = paintFor(process.stdout, config, opts.color === false);
        out(
          isMachineFormat(opts.format)
            ? renderDocument(document(engine ? "EngineStatus" : "Status", view), format)
            : renderStatusText(view, !!engine, Date.now(), paint),
        );
        return EXIT.ok;
      }),
    );

  program
    .command("groups")
    .description("Print cache-equivalence groups (seed 000): signature, representative and roles")
    .addHelpText(
      "after",
      exitCodesHelp([
        ["ok", "printed"],
        ["invalid", "the state cannot be read"],
      ]),
    )
    .addOption(stateOpt())
    .addOption(formatOpt())
    .action(
      act(async (opts) => {
        const { groupReport, renderGroups } = await import("../controller/groups.js");
        const groups = groupReport(Object.values((await readState(configFrom(opts).stateDir)).engines));
        out(
          isMachineFormat(opts.format)
            ? renderDocument(listDocument("Groups", groups), format)
            : renderGroups(groups) || "no groups yet: no engine has been inspected",
        );
        return EXIT.ok;
      }),
    );

  program
    .command("down")
    .description("Stop every engine the state knows: gracefully, then SIGKILL")
    .addHelpText(
      "after",
      exitCodesHelp([
        ["ok", "every engine stopped (or none was running)"],
        ["invalid", "an engine could not be stopped (its record is kept), or an error"],
      ]),
    )
    .addOption(
      new Option(
        "--desired <dir>",
        "desired-state directory whose node records reach engines on other nodes (env NARWHAL_DESIRED)",
      ).default(undefined, "./desired"),
    )
    .addOption(stateOpt())
    .addOption(formatOpt())
    .action(
      act((opts) =>
        withLogger(opts, async (config, log) => {
          const result = await down(config, log);
          const { stopped } = result;
          out(
            isMachineFormat(opts.format)
              ? renderDocument(document("DownResult", result), format)
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
    .addHelpText(
      "after",
      exitCodesHelp([
        ["ok", "nothing to do"],
        ["invalid", "invalid desired state or an error"],
        ["changes", "changes pending (as terraform plan -detailed-exitcode)"],
      ]),
    )
    .action(
      act((opts) =>
        withLogger(opts, async (config, log) => {
          const result = await validateDesired(config.desiredDir);
          if (!result.state) {
            // In a machine format the plan's failure is an Error document on stderr, as reconcile's is.
            const issues = await explainImageTags(result, config);
            if (isMachineFormat(format)) throw new DesiredStateError(issues);
            printInvalid(config.desiredDir, issues, String(opts.format));
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
    .addHelpText(
      "after",
      exitCodesHelp([
        ["ok", "converged"],
        ["invalid", "refused (desired or observed state moved since the plan), invalid input or an error"],
        ["notConverged", "executed but an engine is not captured"],
      ]),
    )
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

  registerSchemaCommand(program, act, out);
  registerPruneCommand(program, act, out);
  registerLogs(program, act, err);
  registerSuspend(program, act, out);
  completionCommand(program, act, out);
  // `narwhal engine <action>`: the seed's narwhal-engine actions on the same phase functions.
  program.addCommand(engineCommand(act, out, err));
  inheritUsageErrors(program);
  if (tree) {
    tree(program);
    return EXIT.ok;
  }

  try {
    await program.parseAsync(argv);
  } catch (e) {
    const ce = e as { code?: string; message?: string };
    if (typeof ce.code === "string" && ce.code.startsWith("commander.")) {
      if (ce.code === "commander.helpDisplayed" || ce.code === "commander.version") return EXIT.ok;
      // Commander printed the text error and the help hint; a machine format gets a document instead.
      return isMachineFormat(format) ? reportError(usageError(ce.message ?? ""), format, err) : EXIT.invalid;
    }
    return reportError(e, format, err);
  }
  return code;
}

// The bundle (scripts/bundle.mjs) defines this true: its one file is only ever run by bin.ts, the executable.
declare const NARWHAL_BUNDLE_ENTRY: boolean | undefined;

/**
 * This module is the process's entry (node main.js, the bin link, npx), not imported by a test that walks
 * the command tree (test/cli/help-exit-codes.test.ts): the script node runs resolves to this very file.
 */
function isEntry(): boolean {
  if (typeof NARWHAL_BUNDLE_ENTRY === "boolean") return NARWHAL_BUNDLE_ENTRY;
  const script = process.argv[1];
  return !script || !existsSync(script) || realpathSync(script) === fileURLToPath(import.meta.url);
}

let finished = false;

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
if (isEntry()) {
  // Exit 0 is earned: if the event loop drains while the command is still pending (an operation that
  // never settled), Node exits with process.exitCode, and that must not read as success.
  process.exitCode = EXIT.invalid;
  process.on("beforeExit", () => {
    if (!finished)
      err(
        "narwhal: internal error: the command stopped before it finished (an operation never settled); nothing it reported can be trusted.",
      );
  });
  void main().then((code) => {
    finished = true;
    process.exit(code);
  });
}
