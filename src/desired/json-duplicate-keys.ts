// Finds keys that appear twice in one JSON object. JSON.parse (like Python's
// json.loads, which the seed's tools use) silently keeps the last one, so a
// copy-pasted "engine-1" block would quietly replace the first: at the door
// that is an error, not a merge. Runs only on text JSON.parse accepted and
// whose depth is capped (json-safe.ts), so the scan can trust the syntax.

export interface DuplicateKey {
  /** Path segments of the object holding the key. */
  segments: PropertyKey[];
  key: string;
  /** Offsets of the repeated key and of its first occurrence. */
  offset: number;
  firstOffset: number;
}

const WS = new Set([" ", "\t", "\n", "\r"]);

export function findDuplicateKeys(text: string): DuplicateKey[] {
  const out: DuplicateKey[] = [];
  const path: PropertyKey[] = [];
  let i = 0;
  const ws = () => {
    while (i < text.length && WS.has(text[i] as string)) i++;
  };
  const string = (): string => {
    const start = i++;
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      ws();
      if (text[i] === "}") return void i++;
      const seen = new Map<string, number>();
      for (;;) {
        ws();
        const at = i;
        const key = string();
        const first = seen.get(key);
        if (first === undefined) seen.set(key, at);
        else out.push({ segments: [...path], key, offset: at, firstOffset: first });
        ws();
        i++; // ":"
        path.push(key);
        value();
        path.pop();
        ws();
        if (text[i++] !== ",") return;
      }
    }
    if (c === "[") {
      i++;
      ws();
      if (text[i] === "]") return void i++;
      for (let n = 0; ; n++) {
        path.push(n);
        value();
        path.pop();
        ws();
        if (text[i++] !== ",") return;
      }
    }
    if (c === '"') return void string();
    while (i < text.length && !WS.has(text[i] as string) && text[i] !== "," && text[i] !== "]" && text[i] !== "}") i++;
  };
  value();
  return out;
}
