// ${VAR} complete-value substitution (seed 003 §14: "Observability resolves
// endpoint URLs using the same complete-value substitution rules").
// A JSON string that is exactly "${NAME}" becomes the variable's value. Text
// that merely embeds "${...}" is an error, not a template: the seed's tools
// substitute whole values only, and a half-substituted URL or path would
// differ between narwhal and the shell tools that read the same records.

import type { ValidationIssue } from "../errors.js";
import { closestName } from "./did-you-mean.js";
import { jsonPath } from "./schemas.js";

const COMPLETE = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/;

export interface SubstituteOptions {
  /** File name for issues, relative to the desired directory. */
  file: string;
  /** Variables whose values must never be copied into a record (the API key). */
  secretNames?: ReadonlySet<string>;
  /** Why a variable is undefined, when it is a derived one (see urls.ts). */
  explainUndefined?: (name: string) => string | undefined;
}

export interface SubstituteResult<T> {
  value: T;
  issues: ValidationIssue[];
  /** JSON paths whose value could not be substituted (left as written). */
  failedPaths: Set<string>;
  /** Every NAME some complete-value `${NAME}` names, defined or not. */
  referenced: Set<string>;
}

/** Replace every complete-value `${NAME}` string in `doc`; collect every problem. */
export function substitute<T>(
  doc: T,
  variables: Readonly<Record<string, string>>,
  options: SubstituteOptions,
): SubstituteResult<T> {
  const issues: ValidationIssue[] = [];
  const failedPaths = new Set<string>();
  const referenced = new Set<string>();
  const fail = (segments: PropertyKey[], rule: string, message: string) => {
    const path = jsonPath(segments);
    failedPaths.add(path);
    issues.push({ file: options.file, path, message, rule });
  };

  const visit = (value: unknown, segments: PropertyKey[]): unknown => {
    if (typeof value === "string") return substituteString(value, segments);
    if (Array.isArray(value)) return value.map((v, i) => visit(v, [...segments, i]));
    if (value !== null && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, visit(v, [...segments, k])]));
    }
    return value;
  };

  const substituteString = (s: string, segments: PropertyKey[]): string => {
    const m = COMPLETE.exec(s);
    if (!m) {
      if (s.includes("${")) {
        fail(
          segments,
          "substitution",
          `"${s}" embeds \${...} in other text; substitution replaces complete values only — ` +
            `define a variable holding the whole value and write exactly "\${NAME}"`,
        );
      }
      return s;
    }
    const name = m[1] as string;
    referenced.add(name);
    if (options.secretNames?.has(name)) {
      fail(
        segments,
        "secret-reference",
        `\${${name}} is a secret; the launcher passes it itself and records never hold it in clear`,
      );
      return s;
    }
    if (!Object.hasOwn(variables, name)) {
      const meant = closestName(
        name,
        Object.keys(variables).filter((v) => !options.secretNames?.has(v)),
      );
      const why = options.explainUndefined?.(name) ?? (meant === undefined ? undefined : `did you mean ${meant}?`);
      fail(
        segments,
        "substitution",
        `variable ${name} is not defined in deployment.env${why ? ` (${why})` : ""}; define it or write the value directly`,
      );
      return s;
    }
    return variables[name] as string;
  };

  return { value: visit(doc, []) as T, issues, failedPaths, referenced };
}
