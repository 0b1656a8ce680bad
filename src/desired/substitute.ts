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
  // The path of the value being visited, one stack for the whole walk: a copy per value was most of the
  // walk's cost at 1000 engines. Only an issue turns it into a path.
  const segments: PropertyKey[] = [];
  const fail = (rule: string, message: string) => {
    const path = jsonPath(segments);
    failedPaths.add(path);
    issues.push({ file: options.file, path, message, rule });
  };
  const at = (segment: PropertyKey, v: unknown): unknown => {
    segments.push(segment);
    const out = visit(v);
    segments.pop();
    return out;
  };

  const visit = (value: unknown): unknown => {
    if (typeof value === "string") return substituteString(value);
    if (Array.isArray(value)) return value.map((v, i) => at(i, v));
    if (value !== null && typeof value === "object") {
      // As Object.fromEntries would build it (own data properties, a "__proto__" key too), without the
      // two arrays per key it takes.
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(value)) {
        const v = at(k, (value as Record<string, unknown>)[k]);
        if (k === "__proto__")
          Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
        else out[k] = v;
      }
      return out;
    }
    return value;
  };

  const substituteString = (s: string): string => {
    // Most strings name no variable: one scan says so (both cases below need "${").
    if (!s.includes("${")) return s;
    const m = COMPLETE.exec(s);
    if (!m) {
      fail(
        "substitution",
        `"${s}" embeds \${...} in other text; substitution replaces complete values only — ` +
          `define a variable holding the whole value and write exactly "\${NAME}"`,
      );
      return s;
    }
    const name = m[1] as string;
    referenced.add(name);
    if (options.secretNames?.has(name)) {
      fail(
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
        "substitution",
        `variable ${name} is not defined in deployment.env${why ? ` (${why})` : ""}; define it or write the value directly`,
      );
      return s;
    }
    return variables[name] as string;
  };

  return { value: visit(doc) as T, issues, failedPaths, referenced };
}
