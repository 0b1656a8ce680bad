// What every command prints for a machine (--format json|yaml): one document whose first two fields
// are apiVersion and kind, as Kubernetes objects are, so a reader can tell what it got and which
// version of its shape. A list is a document with `items`, never a bare array. The saved plan file
// (controller/plan-file.ts) is such a document already; its version is the one every document has.
import { createRequire } from "node:module";
import { API_VERSION } from "../api-version.js";

export { API_VERSION };

/** The output formats of the commands; the engine actions (seed 001) offer text and json only. */
export const FORMATS = ["text", "json", "yaml"] as const;
export const MACHINE_FORMATS: readonly string[] = ["json", "yaml"];

/** Every kind a command prints; a new command adds its own here. */
export type DocumentKind =
  | "ValidationResult"
  | "ReconcileResult"
  | "ApplyResult"
  | "Status"
  | "EngineStatus"
  | "Groups"
  | "DownResult"
  | "Plan"
  | "EngineActionResult"
  | "Error";

export type Document<K extends string, T extends object> = { apiVersion: typeof API_VERSION; kind: K } & T;

/**
 * `body` as a document of `kind`: apiVersion and kind first, then the body's own fields. A body that
 * already is a document (a saved plan read back) keeps its fields but takes this kind and version.
 */
export function document<K extends string, T extends object>(kind: K, body: T): Document<K, T> {
  const { apiVersion: _v, kind: _k, ...rest } = body as T & { apiVersion?: unknown; kind?: unknown };
  return { apiVersion: API_VERSION, kind, ...(rest as T) };
}

/** A list as a document: `{apiVersion, kind, items}`. */
export function listDocument<K extends string, T>(kind: K, items: T[]): Document<K, { items: T[] }> {
  return document(kind, { items });
}

export const isMachineFormat = (format: string | undefined): boolean => MACHINE_FORMATS.includes(format ?? "text");

/**
 * A document in a machine format: JSON indented by two, or YAML (block style, keys in the document's
 * order, no aliases: a reader sees every value where it is).
 */
export function renderDocument(doc: object, format: string): string {
  if (format === "yaml") {
    // Loaded only for YAML output: the yaml package costs every command about 0.08 s of CPU to load.
    const { stringify } = createRequire(import.meta.url)("yaml") as typeof import("yaml");
    return stringify(doc, { aliasDuplicateObjects: false, lineWidth: 0 }).trimEnd();
  }
  return JSON.stringify(doc, null, 2);
}

/** The first `--format` the command line names (`--format X` or `--format=X`), before commander parses it. */
export function formatInArgv(argv: string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--") return undefined;
    if (a === "--format") return argv[i + 1];
    if (a.startsWith("--format=")) return a.slice("--format=".length);
  }
  return undefined;
}
