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

// Character codes, compared directly (a Set of one-character strings per character cost most of the scan).
const SPACE = 32;
const TAB = 9;
const LF = 10;
const CR = 13;
const QUOTE = 34;
const BACKSLASH = 92;
const COMMA = 44;
const OPEN_OBJECT = 123;
const CLOSE_OBJECT = 125;
const OPEN_ARRAY = 91;
const CLOSE_ARRAY = 93;
const isWs = (c: number) => c === SPACE || c === LF || c === CR || c === TAB;

export function findDuplicateKeys(text: string): DuplicateKey[] {
  const out: DuplicateKey[] = [];
  const path: PropertyKey[] = [];
  const n = text.length;
  let i = 0;
  const ws = () => {
    while (i < n && isWs(text.charCodeAt(i))) i++;
  };
  const string = (): string => {
    const start = i++;
    let escaped = false;
    for (let c = text.charCodeAt(i); i < n && c !== QUOTE; c = text.charCodeAt(i)) {
      if (c === BACKSLASH) {
        escaped = true;
        i += 2;
      } else i++;
    }
    i++;
    // Without an escape the text between the quotes is the string itself (the syntax is already valid).
    return escaped ? (JSON.parse(text.slice(start, i)) as string) : text.slice(start + 1, i - 1);
  };
  const value = (): void => {
    ws();
    const c = text.charCodeAt(i);
    if (c === OPEN_OBJECT) {
      i++;
      ws();
      if (text.charCodeAt(i) === CLOSE_OBJECT) return void i++;
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
        if (text.charCodeAt(i++) !== COMMA) return;
      }
    }
    if (c === OPEN_ARRAY) {
      i++;
      ws();
      if (text.charCodeAt(i) === CLOSE_ARRAY) return void i++;
      for (let k = 0; ; k++) {
        path.push(k);
        value();
        path.pop();
        ws();
        if (text.charCodeAt(i++) !== COMMA) return;
      }
    }
    if (c === QUOTE) return void string();
    for (let d = text.charCodeAt(i); i < n; d = text.charCodeAt(i)) {
      if (isWs(d) || d === COMMA || d === CLOSE_ARRAY || d === CLOSE_OBJECT) break;
      i++;
    }
  };
  value();
  return out;
}
