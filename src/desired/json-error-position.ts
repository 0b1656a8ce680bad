// Locates the first syntax error in JSON text. Node 20's JSON.parse messages
// do not always carry a position, and an operator needs "line 12 column 5",
// so on failure we re-scan with this small recursive-descent checker. Depth
// is already capped (json-safe.ts), so recursion stays shallow.

export interface JsonErrorPosition {
  offset: number;
  /** What was wrong there, e.g. "unexpected ']'" or "unexpected end of input". */
  reason: string;
}

/** Raised by the scanner at the first error and caught in findJsonError; never escapes it. */
class JsonStop extends Error {
  constructor(readonly at: JsonErrorPosition) {
    super(at.reason);
  }
}

export function findJsonError(text: string): JsonErrorPosition | undefined {
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i] as string)) i++;
  };
  const fail = (reason?: string): never => {
    throw new JsonStop({
      offset: i,
      reason: reason ?? (i >= text.length ? "unexpected end of input" : `unexpected ${JSON.stringify(text[i])}`),
    });
  };
  const expect = (c: string) => (text[i] === c ? i++ : fail());
  const string = () => {
    expect('"');
    while (i < text.length && text[i] !== '"') {
      const c = text.charCodeAt(i);
      if (c < 0x20) fail("control character in string; escape it");
      if (text[i] === "\\") {
        i++;
        if (text[i] === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 1, i + 5))) fail("bad \\u escape");
          i += 4;
        } else if (!'"\\/bfnrt'.includes(text[i] ?? "x")) fail("bad escape");
      }
      i++;
    }
    expect('"');
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      ws();
      if (text[i] === "}") {
        i++;
        return;
      }
      for (;;) {
        ws();
        string();
        ws();
        expect(":");
        value();
        ws();
        if (text[i] === ",") {
          i++;
          continue;
        }
        expect("}");
        return;
      }
    }
    if (c === "[") {
      i++;
      ws();
      if (text[i] === "]") {
        i++;
        return;
      }
      for (;;) {
        value();
        ws();
        if (text[i] === ",") {
          i++;
          continue;
        }
        expect("]");
        return;
      }
    }
    if (c === '"') return string();
    const m = /^(?:-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)/.exec(text.slice(i, i + 400));
    if (!m) fail();
    i += (m as RegExpExecArray)[0].length;
  };
  try {
    value();
    ws();
    if (i < text.length) fail("unexpected text after the JSON value");
    return undefined;
  } catch (e) {
    // Only the scanner's own stop is a position; anything else is a bug to surface, not a location.
    if (e instanceof JsonStop) return e.at;
    throw e;
  }
}
