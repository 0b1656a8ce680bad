// Seed 000's own Python snippets, taken from the seed file at test time by their
// heredoc markers (`python3 - <<'PY_X'` ... `PY_X`), so the tests run the seed's
// code, not a retyping of it. test/fixtures/seeds/ holds the seed byte for byte.
//
// The seed as stored has lost its indentation: every line starts at column 0, which
// Python cannot run. The one change made here is each line's leading whitespace, given
// per snippet below as one indent level (4 spaces) per line; `snippet` checks that
// stripping it gives back exactly the seed's lines, so nothing but whitespace differs.
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { REPO } from "./sim-fleet.js";

export const SEED_000 = path.join(REPO, "test/fixtures/seeds/000_82246531311c51bb.txt");

/** Indent level of each line of each snippet (Python's block structure, which the seed's text no longer shows). */
const LEVELS = {
  PY_LAUNCH: "0000011",
  PY_DEVICES: "0000000101",
  PY_CACHE_GROUPS: "0000000011222222211101",
  PY_ENGINE: "0000000000000101112121000100000011000",
} as const;

export type SnippetName = keyof typeof LEVELS;

/** The snippet's lines exactly as the seed has them. */
export function seedLines(name: SnippetName, seedFile = SEED_000): string[] {
  const lines = fs.readFileSync(seedFile, "utf8").split("\n");
  const start = lines.indexOf(`python3 - <<'${name}'`);
  const end = lines.indexOf(name, start + 1);
  if (start < 0 || end < 0) throw new Error(`${seedFile} has no heredoc ${name}`);
  return lines.slice(start + 1, end);
}

/** The snippet as Python runs it: the seed's lines, each with its indentation restored. */
export function snippet(name: SnippetName, seedFile = SEED_000): string {
  const lines = seedLines(name, seedFile);
  const levels = LEVELS[name];
  if (levels.length !== lines.length)
    throw new Error(`${name}: the seed has ${lines.length} lines, indentation is given for ${levels.length}`);
  const code = lines.map((l, i) => " ".repeat(4 * Number(levels[i])) + l);
  // Only leading whitespace was added: the seed's text comes back exactly.
  const back = code.map((l) => l.trimStart());
  if (back.some((l, i) => l !== lines[i])) throw new Error(`${name}: restoring indentation changed a line`);
  return code.join("\n") + "\n";
}

export interface PyRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Run a snippet as the seed does (`python3 - <<'PY_X'`: the code on stdin) with /usr/bin/python3
 * and `env` added to this process's environment. `wrap` prefixes the command (e.g. unshare).
 */
export function runSnippet(
  name: SnippetName,
  env: Record<string, string>,
  opts: { wrap?: string[]; cwd?: string } = {},
): Promise<PyRun> {
  const argv = [...(opts.wrap ?? []), "/usr/bin/python3", "-"];
  const child = spawn(argv[0]!, argv.slice(1), {
    env: { ...process.env, ...env },
    cwd: opts.cwd,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  child.stdin.end(snippet(name));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}
