// `narwhal engine <action>`: the seed's narwhal-engine command (seed 001), its
// actions, option names and help wording. Errors go to main.ts's one error
// boundary; every action prints an engine result (result.ts).
import path from "node:path";
import { Command, InvalidArgumentError, Option } from "commander";
import { narwhalVersion } from "../../app.js";
import { MAX_SHARED, MIN_SHARED } from "../../phases/shared-budget.js";
import { refusal } from "../../phases/action-error.js";
import { registrationSource } from "../../phases/registration-source.js";
import type { ActionContext } from "./context.js";
import { renderResult, type EngineResult } from "./result.js";
import { lazy } from "../lazy.js";
import { exitCodesHelp } from "../exit-codes.js";

// The actions (and the backends they reach) load only when one runs: `narwhal --help` and every other
// command register this tree without loading them (lazy.ts).
const actions = () => import("./actions.js");
const prepareAction = lazy(async () => (await import("./prepare-action.js")).prepareAction);
const checkAction = lazy(async () => (await actions()).checkAction);
const measureCacheAction = lazy(async () => (await actions()).measureCacheAction);
const modelDimensionsAction = lazy(async () => (await actions()).modelDimensionsAction);
const handshakePolicyAction = lazy(async () => (await actions()).handshakePolicyAction);
const startAction = lazy(async () => (await actions()).startAction);
const captureCacheAction = lazy(async () => (await actions()).captureCacheAction);
const cacheRegistrationAction = lazy(async () => (await actions()).cacheRegistrationAction);
const startSharedAction = lazy(async () => (await actions()).startSharedAction);
const stopNativeAction = lazy(async () => (await actions()).stopNativeAction);
const nativeCaptureAction = lazy(async () => (await import("./attestation-actions.js")).nativeCaptureAction);
const attestationServeAction = lazy(async () => (await import("./attestation-actions.js")).attestationServeAction);

type Opts = Record<string, unknown> & { format?: string; state?: string };

/** Every action's exit codes: it prints its result, or its error names the action, the input and the fix. */
const ACTION_EXIT_CODES = exitCodesHelp([
  ["ok", "done (its result printed)"],
  ["invalid", "refused or failed (the error names the action, the input at fault and the fix)"],
]);
export type Act = (fn: (opts: Opts, ...args: unknown[]) => Promise<number>) => (...args: unknown[]) => Promise<void>;

/**
 * seed 001 "Actions": name, backends, and what it does in the seed's words — but for prepare's
 * "hook hashes": narwhal runs no hooks, so its help names what prepare does verify and record
 * (the model config hash; the launcher digest, src/launcher.ts, which check compares).
 */
export const ENGINE_ACTIONS = [
  [
    "prepare",
    "container, native",
    "Read NARWHAL_ENGINE_LAUNCH_CONFIG and the deployment environment, verify the model config hash, then write a fresh launch directory with launch.json (recording the launcher digest) and the backend environment.",
  ],
  [
    "check",
    "container, native",
    "Read the prepared plan, check the pinned packages, model, tokenizer and NIXL connector, then bind checked.json to that plan. Repeated checks append their attempts to the backend check log.",
  ],
  [
    "measure-cache",
    "container",
    "Start a temporary sizing container from a checked, unused plan, write cache-layout.json, then remove the completed sizing container.",
  ],
  ["model-dimensions", "container", "Inspect the model through the checked runtime and write model-dimensions.json."],
  [
    "handshake-policy",
    "container, native",
    "Inspect the installed NIXL worker against the checked connector settings and write handshake-policy.json.",
  ],
  [
    "start",
    "container",
    "Start one serving container from a checked plan and record container.id. Verify its HTTP readiness after launch.",
  ],
  [
    "capture-cache",
    "container",
    "Read the running container recorded in a checked launch directory and retain its live cache pages in cache-layout.json.",
  ],
  [
    "cache-registration",
    "container, native",
    "Resolve block grouping from the checked runtime plus either a serving startup log or captured runtime layout; write cache-registration.json.",
  ],
  [
    "start-shared",
    "container, native",
    "Validate two to eight checked plans sharing one GPU, start them sequentially, and retain readiness, identity and memory readings in each shared-start.json.",
  ],
  [
    "stop-native",
    "native",
    "Validate recorded boot ID and process start ticks, then stop the owned process groups and write native-stop.json.",
  ],
  [
    "native-capture",
    "container, native",
    "Apply the recorded engine environment to Narwhal's model, cache, NIXL and handshake checks, then write a process-bound attestation.json.",
  ],
  [
    "attestation-serve",
    "container, native",
    "Serve the run's process-bound attestation at the path and port of its attestation URL until SIGTERM.",
  ],
] as const;

function positiveInteger(value: string): number {
  if (!/^[1-9][0-9]*$/.test(value)) throw new InvalidArgumentError("must be a positive integer number of seconds.");
  return Number(value);
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** Exactly one --run for every action but start-shared. */
function oneRun(action: string, runs: unknown): string {
  const list = (runs as string[] | undefined) ?? [];
  if (list.length !== 1) {
    throw refusal(
      action,
      list.length
        ? `--run is given ${list.length} times; ${action} takes one launch directory`
        : "--run is required after preparation",
      {
        input: "--run",
        fix: `Select an existing launch directory with --run DIR (repeat --run only for start-shared).`,
      },
    );
  }
  return list[0]!;
}

export function engineCommand(act: Act, out: (s: string) => void, err: (s: string) => void): Command {
  const engine = new Command("engine")
    .description(
      "Prepare and run vLLM engines from the narwhal.engine-launch record (seed 001 narwhal-engine): the native backend runs the checked Python environment, container the Docker launch path; both use the same model, GPU allocation, ports, NIXL connector and runtime argument checks. Each run directory is immutable; a fresh start needs a fresh directory. Actions the seed lists for container only take native plans too.",
    )
    .version(narwhalVersion(), "--version", "Print the installed distribution version.")
    .addHelpText(
      "after",
      `\nPreparation requires a fresh --out; subsequent actions use --run. Each inspection output is retained in its launch directory, so select a fresh prepared and checked directory when recapturing it.${ACTION_EXIT_CODES}`,
    );

  const formatOpt = () =>
    new Option("--format <format>", "Select json for versioned command results.")
      .choices(["text", "json"])
      .default("text");
  const stateOpt = () =>
    new Option(
      "--state <dir>",
      "ownership scope of the engines and containers an action starts (default: the launch directory's parent, so a reconciler's state never adopts or removes them)",
    );
  const runOpt = (many = false) =>
    new Option(
      "--run <dir>",
      many
        ? "Select an existing launch directory; repeat two to eight times for start-shared."
        : "Select an existing launch directory (required after preparation).",
    ).argParser(collect);
  const readyOpt = () =>
    new Option("--ready-seconds <n>", "Positive integer seconds allowed per engine's readiness and identity checks.")
      .argParser(positiveInteger)
      .default(180);
  const backendOpt = (what: string) => new Option("--backend <backend>", what).choices(["container", "native"]);

  /**
   * An action in two halves: `usage` checks the command line (how many --run, which combination of
   * options) and throws before any file is read or written; the function it returns is the action,
   * run in its context.
   */
  const run = (usage: (opts: Opts) => (ctx: ActionContext) => Promise<EngineResult>) =>
    act(async (opts) => {
      const result = usage(opts);
      // Scoped apart from `narwhal reconcile`'s state directory (NARWHAL_STATE is not read here):
      // a reconciler treats engines of its own scope that it does not know as orphans and removes them.
      const first = (opts.run as string[] | undefined)?.[0] ?? (opts.out as string | undefined);
      const scope = opts.state ?? (first ? path.dirname(path.resolve(first)) : process.cwd());
      const { withActionContext } = await import("./context.js");
      const r = await withActionContext({ state: path.resolve(scope) }, result);
      out(renderResult(r, opts.format ?? "text"));
      return 0;
    });
  /** An action on exactly one --run. */
  const onRun = (name: string, result: (ctx: ActionContext, dir: string, opts: Opts) => Promise<EngineResult>) =>
    run((o) => {
      const dir = oneRun(name, o.run);
      return (ctx) => result(ctx, dir, o);
    });
  const action = (name: (typeof ENGINE_ACTIONS)[number][0]) => {
    const [, backends, summary] = ENGINE_ACTIONS.find(([n]) => n === name)!;
    return engine
      .command(name)
      .description(`${summary} [${backends}]`)
      .addOption(formatOpt())
      .addOption(stateOpt())
      .addHelpText("after", ACTION_EXIT_CODES);
  };

  action("prepare")
    .addOption(new Option("--out <dir>", "Create a fresh launch directory (required).").makeOptionMandatory())
    .addOption(backendOpt("Select container or native for this record (default: the launch record's backend)."))
    .addOption(
      new Option(
        "--desired <dir>",
        "desired-state directory with fleet.json, engine-launch.json and deployment.env (env NARWHAL_DESIRED)",
      ).default(undefined, "./desired"),
    )
    .addOption(new Option("--engine <name>", "launch record to prepare, engine-<n> (env NARWHAL_ENGINE)"))
    .action(
      run(
        (o) => (ctx) =>
          prepareAction(ctx, {
            out: String(o.out),
            desired: (o.desired as string | undefined) ?? ctx.env.NARWHAL_DESIRED ?? "desired",
            ...(o.backend ? { backend: o.backend as "container" | "native" } : {}),
            ...(o.engine ? { engine: String(o.engine) } : {}),
          }),
      ),
    );
  action("check")
    .addOption(runOpt())
    .action(onRun("check", (ctx, dir) => checkAction(ctx, dir)));
  action("measure-cache")
    .addOption(runOpt())
    .addOption(readyOpt())
    .action(onRun("measure-cache", (ctx, dir, o) => measureCacheAction(ctx, dir, o.readySeconds as number)));
  action("model-dimensions")
    .addOption(runOpt())
    .action(onRun("model-dimensions", (ctx, dir) => modelDimensionsAction(ctx, dir)));
  action("handshake-policy")
    .addOption(runOpt())
    .action(onRun("handshake-policy", (ctx, dir) => handshakePolicyAction(ctx, dir)));
  action("start")
    .addOption(runOpt())
    .addOption(readyOpt())
    .action(onRun("start", (ctx, dir, o) => startAction(ctx, dir, o.readySeconds as number)));
  action("capture-cache")
    .addOption(runOpt())
    .action(onRun("capture-cache", (ctx, dir) => captureCacheAction(ctx, dir)));
  action("cache-registration")
    .addOption(runOpt())
    .addOption(
      new Option(
        "--startup-log <file>",
        "Serving log with one resolved KV layout, used by cache-registration; exclusive with --runtime-layout.",
      ),
    )
    .addOption(
      new Option(
        "--runtime-layout <file>",
        "Captured runtime cache-layout JSON used by cache-registration; exclusive with --startup-log.",
      ),
    )
    .action(
      run((o) => {
        const dir = oneRun("cache-registration", o.run);
        const source = {
          ...(o.startupLog ? { startupLog: String(o.startupLog) } : {}),
          ...(o.runtimeLayout ? { runtimeLayout: String(o.runtimeLayout) } : {}),
        };
        registrationSource(source); // exactly one of the two, before the run directory is read
        return (ctx) => cacheRegistrationAction(ctx, dir, source);
      }),
    );
  action("start-shared")
    .addOption(runOpt(true))
    .addOption(
      backendOpt(
        "Select container or native; shared startup requires every selected plan to use that backend.",
      ).default("container"),
    )
    .addOption(readyOpt())
    .action(
      run((o) => {
        const runs = (o.run as string[] | undefined) ?? [];
        if (runs.length < MIN_SHARED || runs.length > MAX_SHARED) {
          throw refusal(
            "start-shared",
            `--run is given ${runs.length} time(s); start-shared takes ${MIN_SHARED} to ${MAX_SHARED} launch directories`,
            { input: "--run", fix: "Repeat --run two to eight times, once per checked plan sharing the GPU." },
          );
        }
        const twice = runs.find((r, i) => runs.findIndex((q) => path.resolve(q) === path.resolve(r)) !== i);
        if (twice) {
          throw refusal("start-shared", `--run names ${twice} twice; each plan starts once`, {
            input: "--run",
            fix: "Give each checked launch directory sharing the GPU once.",
          });
        }
        return (ctx) =>
          startSharedAction(ctx, runs, o.backend as "container" | "native", o.readySeconds as number, (s) =>
            o.format === "json" ? undefined : err(s),
          );
      }),
    );
  action("stop-native")
    .addOption(runOpt())
    .action(onRun("stop-native", (ctx, dir) => stopNativeAction(ctx, dir)));
  action("native-capture")
    .addOption(runOpt())
    .action(onRun("native-capture", (ctx, dir) => nativeCaptureAction(ctx, dir)));
  action("attestation-serve")
    .addOption(runOpt())
    .action(onRun("attestation-serve", (ctx, dir) => attestationServeAction(ctx, dir)));
  return engine;
}
