// cache-registration's choice of layout source, checked when the command line is parsed: its own module,
// so registering `narwhal engine` (every command does) does not load the registration itself and the
// zod schemas of its imports (13 ms of every command's start).
import { refusal } from "./action-error.js";

export const CACHE_REGISTRATION_ACTION = "cache-registration";

export interface RegistrationSource {
  startupLog?: string;
  runtimeLayout?: string;
}

/** Exactly one registration source, or a refusal naming both options. */
export function registrationSource(source: RegistrationSource): {
  kind: "startup-log" | "runtime-layout";
  path: string;
} {
  const given = [
    source.startupLog && { kind: "startup-log" as const, path: source.startupLog },
    source.runtimeLayout && { kind: "runtime-layout" as const, path: source.runtimeLayout },
  ].filter(Boolean);
  if (given.length !== 1) {
    throw refusal(
      CACHE_REGISTRATION_ACTION,
      given.length
        ? "--startup-log and --runtime-layout are exclusive; choose one registration source"
        : "choose one registration source: --startup-log FILE or --runtime-layout FILE",
      {
        input: "--startup-log / --runtime-layout",
        fix: "Pass a serving log with one resolved KV layout (--startup-log) or a captured runtime cache-layout JSON (--runtime-layout), not both.",
      },
    );
  }
  return given[0] as { kind: "startup-log" | "runtime-layout"; path: string };
}
