// Parser for desired/deployment.env, the seed's config/deployment.env.
// Deliberately small and strict: the same file is sourced by shells on the
// engine hosts, so anything a shell would read differently from us (unbalanced
// quotes, spaces around "=", `$(...)`) is rejected with its line number rather
// than guessed at. Values are literal: no ${VAR} expansion inside the file.

import type { ValidationIssue } from "../errors.js";

export interface EnvFileResult {
  variables: Record<string, string>;
  issues: ValidationIssue[];
}

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Names that could reach an object's prototype if the variables are ever merged with Object.assign. */
const PROTOTYPE_NAMES = new Set(["__proto__", "constructor", "prototype"]);

/** Parse dotenv-ish text: `KEY=VALUE`, `# comments`, optional quotes, optional `export `. */
export function parseEnvFile(text: string, file = "deployment.env"): EnvFileResult {
  // A null-prototype object: a key named __proto__ stays a plain entry.
  const variables: Record<string, string> = Object.create(null) as Record<string, string>;
  const issues: ValidationIssue[] = [];
  const firstLine = new Map<string, number>();
  const lines = text.split(/\r?\n/);

  lines.forEach((raw, i) => {
    const lineNo = i + 1;
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const issue = (message: string, key?: string) =>
      issues.push({
        file,
        path: key ? `$.${key}` : `line ${lineNo}`,
        message: `line ${lineNo}: ${message}`,
        rule: "syntax",
      });

    const body = line.startsWith("export ") ? line.slice(7).trimStart() : line;
    const eq = body.indexOf("=");
    if (eq <= 0) return void issue("expected KEY=VALUE");
    const key = body.slice(0, eq);
    if (!KEY.test(key)) {
      return void issue(`"${key}" is not a variable name (letters, digits, _; no spaces around "=")`);
    }
    if (PROTOTYPE_NAMES.has(key))
      issue(`"${key}" is not allowed as a variable name (it could alter object prototypes); rename it`, key);
    const parsed = parseValue(body.slice(eq + 1));
    if (typeof parsed !== "string") return void issue(parsed.error, key);
    if (firstLine.has(key)) {
      return void issue(`${key} is already set on line ${firstLine.get(key)}; set each variable once`, key);
    }
    firstLine.set(key, lineNo);
    variables[key] = parsed;
  });
  // Kept null-prototype so a lookup of "constructor" finds nothing.
  return { variables, issues };
}

function parseValue(rest: string): string | { error: string } {
  if (rest.startsWith(" ") || rest.startsWith("\t")) {
    return { error: 'no spaces after "="; quote the value if it starts with a space' };
  }
  const q = rest[0];
  if (q === "'" || q === '"') {
    const end = findClosingQuote(rest, q);
    if (end < 0) return { error: `unterminated ${q === "'" ? "single" : "double"} quote` };
    const after = rest.slice(end + 1).trim();
    if (after !== "" && !after.startsWith("#")) return { error: "unexpected text after the closing quote" };
    const inner = rest.slice(1, end);
    return q === "'" ? inner : unescapeDouble(inner);
  }
  // Unquoted: an inline comment starts at " #", as in shells and compose.
  const hash = rest.search(/\s#/);
  const value = (hash >= 0 ? rest.slice(0, hash) : rest).trimEnd();
  if (/[\s"'`]|\$\(/.test(value)) {
    return { error: "unquoted value contains spaces, quotes, backticks or $(...); quote it" };
  }
  return value;
}

function findClosingQuote(s: string, q: string): number {
  for (let i = 1; i < s.length; i++) {
    if (q === '"' && s[i] === "\\") {
      i++;
      continue;
    }
    if (s[i] === q) return i;
  }
  return -1;
}

function unescapeDouble(s: string): string {
  return s.replace(/\\(.)/g, (_m, c: string) => (c === "n" ? "\n" : c === "t" ? "\t" : c));
}
