// The options most commands share, and the action wrapper's type: one definition each, so every
// command spells --desired, --state and --format alike (and a command that prints a document offers
// yaml wherever it offers json). Light: commander and the document formats only.
import { Option } from "commander";
import { FORMATS } from "./documents.js";
import type { GlobalOptions } from "./config-from.js";

/** main.ts's action wrapper: runs the command body and keeps its exit code (and --format for errors). */
export type Act = (
  fn: (opts: GlobalOptions & Record<string, unknown>, ...args: unknown[]) => Promise<number>,
) => (...args: unknown[]) => Promise<void>;

/** --desired; `what` says what the command reads there. */
export const desiredOpt = (what = "desired-state directory") =>
  new Option("--desired <dir>", `${what} (env NARWHAL_DESIRED)`).default(undefined, "./desired");

export const stateOpt = () =>
  new Option("--state <dir>", "state directory (env NARWHAL_STATE)").default(undefined, "./state");

export const formatOpt = () =>
  new Option("--format <format>", "output format: json and yaml print an apiVersion/kind document")
    .choices(FORMATS)
    .default("text");
