// scripts/bundle.mjs makes the CLI bundle ASCII by replacing the characters outside ASCII that esbuild leaves in
// comments: a file where one sits in code (a tagged template's raw text) must stop the build, unchanged.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { asciiComments } from "../../scripts/bundle.mjs";

async function file(text: string): Promise<string> {
  const f = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-ascii-")), "cli.cjs");
  await fs.writeFile(f, text);
  return f;
}

describe("the bundle's ASCII step", () => {
  it("replaces what comments hold, one '?' per UTF-16 unit, and leaves the code as it was", async () => {
    const f = await file('"use strict";\n// a dash \u2014 and \u{1F600}\n/*\n * \u00a7 16\n */\nconsole.log("x");\n');
    await asciiComments(f);
    expect(await fs.readFile(f, "utf8")).toBe(
      '"use strict";\n// a dash ? and ??\n/*\n * ? 16\n */\nconsole.log("x");\n',
    );
  });

  it("stops, changing nothing, where a character outside ASCII is code (a raw template line that starts with *)", async () => {
    const text = "const t = String.raw`x\n* \u2014y`;\nconsole.log(t);\n";
    const f = await file(text);
    await expect(asciiComments(f)).rejects.toThrow("is in code, not only in comments");
    expect(await fs.readFile(f, "utf8")).toBe(text);
  });
});
