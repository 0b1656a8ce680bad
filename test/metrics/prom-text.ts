// A strict reader of the Prometheus text exposition format (0.0.4), for tests
// that scrape /metrics: every line must be a comment, a # HELP / # TYPE of a
// family, or a sample of a family whose TYPE came first; histograms must have
// cumulative buckets ending at +Inf equal to _count. Anything else throws.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: "counter" | "gauge" | "histogram" | "summary" | "untyped";
  help: string;
  samples: Sample[];
}

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const LABEL = `([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\\\\n]|\\\\[\\\\"n])*)"`;
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*,?)?\\})? (\\S+)(?: (-?\\d+))?$`);
const VALUE = /^(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|[+-]Inf|NaN)$/;

function parseValue(raw: string, line: string): number {
  if (!VALUE.test(raw)) throw new Error(`not a sample value: ${JSON.stringify(line)}`);
  return raw === "+Inf" ? Infinity : raw === "-Inf" ? -Infinity : Number(raw);
}

function parseLabels(raw: string | undefined): Record<string, string> {
  const labels: Record<string, string> = {};
  if (!raw) return labels;
  for (const m of raw.matchAll(new RegExp(LABEL, "g"))) {
    if (m[1]! in labels) throw new Error(`label ${m[1]} repeated in {${raw}}`);
    labels[m[1]!] = m[2]!.replace(/\\(["\\n])/g, (_, c: string) => (c === "n" ? "\n" : c));
  }
  return labels;
}

/** The family a sample belongs to: histograms and summaries add suffixes to their name. */
function familyOf(families: Map<string, Family>, name: string): Family | undefined {
  if (families.has(name)) return families.get(name);
  const base = name.replace(/_(bucket|sum|count)$/, "");
  const f = families.get(base);
  return f && (f.type === "histogram" || f.type === "summary") ? f : undefined;
}

function checkHistogram(f: Family): void {
  const series = new Map<string, Sample[]>();
  const key = (labels: Record<string, string>) =>
    JSON.stringify(
      Object.entries(labels)
        .filter(([k]) => k !== "le")
        .sort(([a], [b]) => a.localeCompare(b)),
    );
  for (const s of f.samples.filter((s) => s.name === `${f.name}_bucket`)) {
    if (s.labels.le === undefined) throw new Error(`${f.name}_bucket without le`);
    series.set(key(s.labels), [...(series.get(key(s.labels)) ?? []), s]);
  }
  for (const [k, buckets] of series) {
    let prev = -Infinity;
    let count = -1;
    for (const b of buckets) {
      const le = parseValue(b.labels.le!, b.labels.le!);
      if (le <= prev) throw new Error(`${f.name} ${k}: le ${b.labels.le} not increasing`);
      if (b.value < count) throw new Error(`${f.name} ${k}: bucket le=${b.labels.le} is not cumulative`);
      prev = le;
      count = b.value;
    }
    if (prev !== Infinity) throw new Error(`${f.name} ${k}: no +Inf bucket`);
    const total = f.samples.find((s) => s.name === `${f.name}_count` && key(s.labels) === k);
    if (!total || total.value !== count) throw new Error(`${f.name} ${k}: _count is not the +Inf bucket`);
    if (!f.samples.some((s) => s.name === `${f.name}_sum` && key(s.labels) === k))
      throw new Error(`${f.name} ${k}: no _sum`);
  }
}

export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  if (text !== "" && !text.endsWith("\n")) throw new Error("the exposition does not end with a newline");
  for (const line of text.split("\n").slice(0, -1)) {
    if (line === "") continue;
    const meta = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
    if (meta) {
      const [, kind, name, rest] = meta as unknown as [string, string, string, string];
      if (!new RegExp(`^${NAME}$`).test(name)) throw new Error(`bad metric name: ${JSON.stringify(line)}`);
      const f = families.get(name) ?? { name, type: "untyped" as const, help: "", samples: [] };
      if (f.samples.length > 0) throw new Error(`# ${kind} of ${name} after its samples`);
      if (kind === "HELP") f.help = rest;
      else if (["counter", "gauge", "histogram", "summary", "untyped"].includes(rest)) f.type = rest as Family["type"];
      else throw new Error(`bad TYPE: ${JSON.stringify(line)}`);
      families.set(name, f);
      continue;
    }
    if (line.startsWith("#")) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const name = m[1]!;
    const f = familyOf(families, name);
    if (!f) throw new Error(`sample of ${name} before its # TYPE`);
    f.samples.push({ name, labels: parseLabels(m[2]), value: parseValue(m[m.length - 2]!, line) });
  }
  for (const f of families.values()) {
    if (f.type === "counter" && f.samples.some((s) => s.value < 0)) throw new Error(`${f.name}: negative counter`);
    if (f.type === "histogram") checkHistogram(f);
  }
  return families;
}

/** The value of the one sample of `name` whose labels include `labels` (undefined: none). */
export function sampleValue(
  families: Map<string, Family>,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const f = familyOf(families, name);
  const matches = (f?.samples ?? []).filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (matches.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${matches.length} samples`);
  return matches[0]?.value;
}
