// The result every `narwhal engine <action>` prints: with --format json a
// versioned document (apiVersion narwhal/v1, kind EngineActionResult, as every
// command's; `schema` narwhal.engine-result/v1 is kept for its earlier readers),
// else a few lines for people.
import { document, renderDocument } from "../documents.js";

export const ENGINE_RESULT_SCHEMA = "narwhal.engine-result/v1";

export interface EngineResult {
  schema: typeof ENGINE_RESULT_SCHEMA;
  action: string;
  ok: true;
  /** The run directory (start-shared: every selected one, in launch order). */
  run: string | string[];
  engine?: string | string[];
  /** Files the action wrote or relies on, by name → absolute path. */
  files: Record<string, string>;
  /** One line per notable fact, for the text format. */
  summary: string[];
  /** The action's own data (plan hash, readings, layout ...). */
  details: Record<string, unknown>;
}

export function engineResult(
  action: string,
  run: string | string[],
  parts: Partial<Pick<EngineResult, "engine" | "files" | "summary" | "details">>,
): EngineResult {
  return {
    schema: ENGINE_RESULT_SCHEMA,
    action,
    ok: true,
    run,
    ...(parts.engine ? { engine: parts.engine } : {}),
    files: parts.files ?? {},
    summary: parts.summary ?? [],
    details: parts.details ?? {},
  };
}

export function renderResult(result: EngineResult, format: string): string {
  if (format === "json") return renderDocument(document("EngineActionResult", result), format);
  const runs = Array.isArray(result.run) ? result.run.join(", ") : result.run;
  const lines = [
    `${result.action}: ${[result.engine].flat().filter(Boolean).join(", ")} ${runs}`.replace(/\s+/g, " ").trim(),
  ];
  lines.push(...result.summary.map((s) => `  ${s}`));
  for (const [name, file] of Object.entries(result.files)) lines.push(`  wrote ${name}: ${file}`);
  return lines.join("\n");
}
