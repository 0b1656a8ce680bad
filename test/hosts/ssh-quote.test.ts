// shQuote against real shells: any argument (NUL aside, which no argv can hold)
// quoted by shQuote reaches the command unchanged through `sh -c`, as a remote
// shell receives what OpenSSH sends. Checked with dash (Debian's /bin/sh) and bash.
import { spawnSync } from "node:child_process";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { NarwhalError } from "../../src/errors.js";
import { isShellName, shCommand, shQuote } from "../../src/hosts/ssh-quote.js";

/** What `shell -c "printf '%s\0' <quoted args>"` hands printf. */
function throughShell(shell: string, args: string[]): string[] {
  const r = spawnSync(shell, ["-c", `printf '%s\\0' ${shCommand(args)}`], { encoding: "utf8" });
  expect(r.status).toBe(0);
  return r.stdout.split("\0").slice(0, -1);
}

const arg = fc.string({ unit: "binary", maxLength: 40 }).map((s) => s.replaceAll("\0", ""));
const shellish = fc
  .array(
    fc.constantFrom(
      "'",
      '"',
      "\\",
      "$",
      "`",
      "!",
      "*",
      "?",
      "~",
      " ",
      "\n",
      "\t",
      ";",
      "&",
      "|",
      "(",
      ")",
      "{",
      "}",
      "#",
      "=",
      "%",
      "-",
      "a",
    ),
    {
      maxLength: 12,
    },
  )
  .map((cs) => cs.join(""));

describe("shQuote", () => {
  for (const shell of ["/bin/sh", "/bin/bash"]) {
    it(`round-trips arbitrary strings through ${shell} -c`, () => {
      fc.assert(
        fc.property(fc.array(fc.oneof(arg, shellish), { minLength: 1, maxLength: 6 }), (args) => {
          expect(throughShell(shell, args)).toEqual(args);
        }),
        { numRuns: 150 },
      );
    });
  }

  it("keeps an empty argument as one argument", () => {
    expect(throughShell("/bin/sh", ["", "x", ""])).toEqual(["", "x", ""]);
  });

  it("refuses a NUL byte rather than cutting the argument short", () => {
    expect(() => shQuote("a\0b")).toThrow(NarwhalError);
  });

  it("accepts only names a shell can export", () => {
    expect(["PATH", "_x1", "NARWHAL_LAUNCH_TOKEN"].every(isShellName)).toBe(true);
    expect(["", "1A", "A-B", "A B", "A=B", "$(x)"].some(isShellName)).toBe(false);
  });
});
