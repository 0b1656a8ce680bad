import { describe, expect, it } from "vitest";
import { parseEnvFile } from "../../src/desired/env-file.js";

describe("parseEnvFile", () => {
  it("reads KEY=VALUE, comments, quotes, export and inline comments", () => {
    const r = parseEnvFile(
      [
        "# comment",
        "",
        "A=1",
        "export B=two",
        `C="x y # not a comment"`,
        "D='$literal \\n'",
        "E=val # trailing",
        `F="a\\"b\\nc"`,
        "G=",
        "  H=indented",
      ].join("\n"),
    );
    expect(r.issues).toEqual([]);
    expect({ ...r.variables }).toEqual({
      A: "1",
      B: "two",
      C: "x y # not a comment",
      D: "$literal \\n",
      E: "val",
      F: 'a"b\nc',
      G: "",
      H: "indented",
    });
  });

  it("rejects malformed lines with their line numbers, all at once", () => {
    const r = parseEnvFile(["A=1", "not a line", "B = 2", "C='open", "D=two words", "A=3", "1X=y"].join("\n"));
    expect(r.issues.map((i) => i.message.split(":")[0])).toEqual([
      "line 2",
      "line 3",
      "line 4",
      "line 5",
      "line 6",
      "line 7",
    ]);
    expect(r.issues.every((i) => i.file === "deployment.env" && i.rule === "syntax")).toBe(true);
    expect(r.issues.find((i) => i.message.startsWith("line 6"))?.message).toMatch(/already set on line 1/);
  });

  it("keeps prototype-named keys inert", () => {
    const r = parseEnvFile("constructor=x\n");
    expect(r.variables["constructor"]).toBe("x");
    expect(parseEnvFile("A=1").variables["constructor"]).toBeUndefined();
  });
});
