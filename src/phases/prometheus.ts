// A small parser for the Prometheus text exposition format: enough for vLLM's
// /metrics (names with colons, quoted labels with escapes, float values).
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*/g;

export function parsePrometheus(text: string): Sample[] {
  const out: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(LABEL))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    out.push({ name: m[1]!, labels, value: parseValue(m[3]!) });
  }
  return out;
}

// The exposition format spells infinities "+Inf"/"-Inf", which Number() reads as NaN.
function parseValue(text: string): number {
  const inf = /^([+-]?)Inf$/i.exec(text);
  return inf ? (inf[1] === "-" ? -Infinity : Infinity) : Number(text);
}

export function sampleValue(samples: Sample[], name: string): number | undefined {
  return samples.find((s) => s.name === name)?.value;
}

export function sampleLabels(samples: Sample[], name: string): Record<string, string> | undefined {
  return samples.find((s) => s.name === name)?.labels;
}
