// Keeps docs/seed-conformance.md honest mechanically: every row's `Where` names
// files that exist and functions those files contain, every `Test` names a test
// file that exists and titles that appear in it, every status is one of the
// legend's, and the summary counts what the tables hold. A step renamed or a
// test retitled without its row fails here, not in a reader's hands.
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const repo = path.resolve(import.meta.dirname, "../..");
const DOC = "docs/seed-conformance.md";
const STATUSES = ["✅", "🟡", "❌", "➖", "🔧"] as const;
type Status = (typeof STATUSES)[number];
const PATH = /^(src|test|machines|scripts|desired|examples|docs)\/[^\s]+\.[a-z]+$/;

interface Row {
  line: number;
  id: string;
  status: string;
  where: string;
  test: string;
}

/** Table rows whose header is `| # | Seed passage | Requirement | Status | Where | Test |`. */
function rows(text: string): Row[] {
  const out: Row[] = [];
  let inTable = false;
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (!line.startsWith("|")) {
      inTable = false;
      return;
    }
    // A pipe inside a cell is written \| (as in the seed's `case` patterns).
    const cells = line
      .slice(1, -1)
      .split(/(?<!\\)\|/)
      .map((c) => c.trim());
    if (cells[0] === "#" && cells[3] === "Status") {
      inTable = true;
      return;
    }
    if (!inTable || /^:?-+:?$/.test(cells[0]!)) return;
    out.push({ line: i + 1, id: cells[0]!, status: cells[3]!, where: cells[4]!, test: cells[5]! });
  });
  return out;
}

/** Backticked tokens and double-quoted titles, in order (a title may hold backticks). */
function tokens(cell: string): Array<{ code?: string; title?: string }> {
  return [...cell.matchAll(/`([^`]+)`|"([^"]+)"/g)].map((m) => (m[1] !== undefined ? { code: m[1] } : { title: m[2] }));
}

const read = (file: string) => fs.readFileSync(path.join(repo, file), "utf8");
const isFile = (file: string) => fs.existsSync(path.join(repo, file)) && fs.statSync(path.join(repo, file)).isFile();

/** Problems of a `Where` cell: `path` followed by the `names` that file must contain. */
function whereProblems(cell: string): string[] {
  const problems: string[] = [];
  let file: string | null = null;
  for (const t of tokens(cell)) {
    if (t.code === undefined) continue;
    if (PATH.test(t.code)) {
      file = t.code;
      if (!isFile(file)) problems.push(`${file} does not exist`);
      continue;
    }
    if (!file) {
      problems.push(`\`${t.code}\` names no file before it`);
      continue;
    }
    if (!isFile(file)) continue;
    const text = read(file);
    // `Class.method` is found as its parts.
    for (const part of t.code.split(".")) if (!text.includes(part)) problems.push(`${file} has no ${t.code}`);
  }
  return problems;
}

/** Problems of a `Test` cell: `test file` followed by "describe › it" titles, every part of which it contains. */
function testProblems(cell: string): string[] {
  const problems: string[] = [];
  let file: string | null = null;
  let titles = 0;
  for (const t of tokens(cell)) {
    if (t.code !== undefined && PATH.test(t.code)) {
      file = t.code;
      if (!file.startsWith("test/") || !isFile(file)) problems.push(`${file} is not a test file`);
      continue;
    }
    if (t.title === undefined) continue;
    titles++;
    if (!file) {
      problems.push(`"${t.title}" names no test file before it`);
      continue;
    }
    if (!isFile(file)) continue;
    const text = read(file);
    for (const part of t.title.split(" › ")) if (!text.includes(part)) problems.push(`${file} has no test "${part}"`);
  }
  if (titles === 0) problems.push("names no test title");
  return problems;
}

describe("docs/seed-conformance.md", () => {
  const text = read(DOC);
  const all = rows(text);

  it("has a row per requirement, with unique numbers and a known status", () => {
    expect(all.length).toBeGreaterThanOrEqual(87);
    const ids = all.map((r) => r.id);
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([]);
    expect(
      all.filter((r) => !STATUSES.some((s) => r.status.startsWith(s))).map((r) => `${r.line}: ${r.status}`),
    ).toEqual([]);
  });

  it("names, for every implemented or partial row, where it is and the test that proves it", () => {
    const missing = all
      .filter((r) => r.status.startsWith("✅") || r.status.startsWith("🟡"))
      .filter((r) => !tokens(r.where).some((t) => t.code && PATH.test(t.code)) || !/`test\//.test(r.test))
      .map((r) => `line ${r.line} (${r.id})`);
    expect(missing).toEqual([]);
  });

  it("names the issue 12 item of every row being built this session", () => {
    expect(all.filter((r) => r.status.startsWith("🔧") && !/item \d/.test(r.status)).map((r) => r.line)).toEqual([]);
  });

  it("every Where file exists and holds the functions named after it", () => {
    const problems = all.flatMap((r) => whereProblems(r.where).map((p) => `line ${r.line} (${r.id}): ${p}`));
    expect(problems).toEqual([]);
  });

  it("every Test file exists and holds the titles named after it", () => {
    const problems = all
      .filter((r) => r.test && r.test !== "—")
      .flatMap((r) => testProblems(r.test).map((p) => `line ${r.line} (${r.id}): ${p}`));
    expect(problems).toEqual([]);
  });

  it("its summary counts what the tables hold", () => {
    const counted = new Map<Status, number>(STATUSES.map((s) => [s, 0]));
    for (const r of all) {
      const s = STATUSES.find((x) => r.status.startsWith(x))!;
      counted.set(s, counted.get(s)! + 1);
    }
    const summary = new Map<Status, number>();
    for (const m of text.matchAll(/^\| (✅|🟡|❌|➖|🔧)[^|]*\| +(\d+) +\|$/gmu))
      summary.set(m[1] as Status, Number(m[2]));
    expect(Object.fromEntries(summary)).toEqual(Object.fromEntries(counted));
    expect(text).toMatch(new RegExp(`^\\| total +\\| ${all.length} +\\|$`, "m"));
  });
});
