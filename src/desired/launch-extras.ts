// Launch inputs beyond seed 003's record fields: a shared_device block for
// engines that share one GPU (seed 001 "Native shared startup"), and the
// role environment's NARWHAL_ENGINE_ARGS / NARWHAL_ENGINE_ENV, which add
// serving arguments and environment without dropping derived settings.
import * as z from "zod";

/** A plain non-negative decimal as written ("0.3", "1"); JSON numbers are taken as their shortest text. */
const DECIMAL_TEXT = /^\d+(?:\.\d+)?$/;

/** A decimal fraction of device memory in (0, 1], kept as its decimal text so sums stay exact. */
const fraction = z
  .union([z.string(), z.number()])
  .transform((v) => (typeof v === "number" ? String(v) : v.trim()))
  .refine(
    (v) => DECIMAL_TEXT.test(v) && Number(v) > 0 && Number(v) <= 1,
    'must be a decimal fraction of device memory in (0, 1], e.g. "0.45"',
  );

export const SharedDeviceSchema = z
  .object({
    gpu_uuid: z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9:._-]*$/,
        "must be the full GPU UUID, e.g. GPU-4f1a7c2e-8b3d-4e6f-9a0b-1c2d3e4f5a6b",
      )
      .describe("UUID of the one GPU the sharing engines use; every selected device must resolve to it"),
    device_allowance: fraction.describe(
      "Fraction of total device memory the sharing engines may use together; their gpu_memory_utilization sum must not exceed it",
    ),
    // Here, not in runtime.extra_args: the group signature (seed 000) hashes the whole runtime object,
    // and engines sharing a GPU must share their group while each takes its own fraction.
    gpu_memory_utilization: fraction.describe(
      "This engine's fraction of total device memory; the launcher passes it as --gpu-memory-utilization",
    ),
  })
  .strict()
  .describe("One GPU shared by two to eight engines (narwhal engine start-shared)");

export type SharedDevice = z.output<typeof SharedDeviceSchema>;

/** The deployment variables that add to every engine's serving arguments and environment. */
export const ENGINE_ARGS_VARIABLE = "NARWHAL_ENGINE_ARGS";
export const ENGINE_ENV_VARIABLE = "NARWHAL_ENGINE_ENV";

/** NARWHAL_ENGINE_ARGS: a JSON array of strings, or words separated by whitespace. */
export function parseEngineArgs(text: string | undefined): { value: string[] } | { error: string } {
  if (text === undefined || text.trim() === "") return { value: [] };
  if (text.trim().startsWith("[")) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      return { error: `is not a JSON array: ${(err as Error).message}` };
    }
    if (!Array.isArray(value) || !value.every((v) => typeof v === "string"))
      return { error: "must be a JSON array of strings" };
    return { value: value as string[] };
  }
  return { value: text.trim().split(/\s+/) };
}

/** NARWHAL_ENGINE_ENV: a JSON object of strings, or KEY=VALUE words separated by whitespace. */
export function parseEngineEnv(text: string | undefined): { value: Record<string, string> } | { error: string } {
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  if (text === undefined || text.trim() === "") return { value: out };
  let entries: Array<[string, unknown]>;
  if (text.trim().startsWith("{")) {
    try {
      const value = JSON.parse(text) as unknown;
      if (value === null || typeof value !== "object" || Array.isArray(value))
        return { error: "must be a JSON object of strings" };
      entries = Object.entries(value);
    } catch (err) {
      return { error: `is not a JSON object: ${(err as Error).message}` };
    }
  } else {
    entries = text
      .trim()
      .split(/\s+/)
      .map((w) => (w.includes("=") ? [w.slice(0, w.indexOf("=")), w.slice(w.indexOf("=") + 1)] : [w, undefined]));
  }
  for (const [key, value] of entries) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key) || ["__proto__", "constructor", "prototype"].includes(key))
      return { error: `"${key}" is not an environment variable name` };
    if (typeof value !== "string" || /[\r\n\0]/.test(value))
      return { error: `${key} needs a single-line string value (KEY=VALUE)` };
    out[key] = value;
  }
  return { value: out };
}
