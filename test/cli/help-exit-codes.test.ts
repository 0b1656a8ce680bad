// Issue 13's acceptance: every command's --help lists its options and its exit codes. The command
// tree is built exactly as main.ts builds it (run with a tree callback: nothing is parsed or run),
// walked whole, and each command's full help (commander's text and the text added after it) must
// carry one "Exit codes:" line naming only codes src/cli/exit-codes.ts defines.
import { describe, expect, it } from "vitest";
import type { Command } from "commander";
import { run } from "../../src/cli/main.js";
import { EXIT } from "../../src/cli/exit-codes.js";
import { TOP_LEVEL_COMMANDS } from "../../src/cli/command-names.js";

async function commandTree(): Promise<Command> {
  let tree: Command | undefined;
  await run(["node", "narwhal"], (program) => (tree = program));
  return tree!;
}

function* walk(cmd: Command, path: string[] = []): Generator<{ path: string; cmd: Command }> {
  const here = [...path, cmd.name()];
  yield { path: here.join(" "), cmd };
  for (const sub of cmd.commands) yield* walk(sub, here);
}

/** What `<command> --help` prints, captured instead of written. */
function helpOf(cmd: Command): string {
  let text = "";
  cmd.configureOutput({ writeOut: (s) => (text += s), writeErr: (s) => (text += s) });
  cmd.outputHelp();
  return text;
}

const defined = new Set<number>(Object.values(EXIT));

describe("every command's --help", () => {
  it("lists its options and an Exit codes: line naming only codes exit-codes.ts defines", async () => {
    const commands = [...walk(await commandTree())];
    // The whole tree was walked: the top-level commands and every engine action.
    expect(commands.map((c) => c.path)).toEqual(
      expect.arrayContaining(["narwhal", "narwhal reconcile", "narwhal status", "narwhal engine start-shared"]),
    );
    expect(commands.length).toBeGreaterThan(25);
    const wrong: string[] = [];
    for (const { path, cmd } of commands) {
      const help = helpOf(cmd);
      const lines = help.split("\n").filter((l) => l.startsWith("Exit codes: "));
      if (lines.length !== 1) {
        wrong.push(`${path}: ${lines.length} "Exit codes:" lines`);
        continue;
      }
      const items = lines[0]!.slice("Exit codes: ".length).replace(/\.$/, "").split("; ");
      const codes = items.map((i) => /^(\d+) \S/.exec(i)?.[1]);
      if (codes.some((c) => c === undefined || !defined.has(Number(c))))
        wrong.push(`${path}: ${lines[0]} names a code exit-codes.ts does not define`);
      if (new Set(codes).size !== codes.length) wrong.push(`${path}: ${lines[0]} names a code twice`);
      if (!codes.includes(String(EXIT.ok)) || !codes.includes(String(EXIT.invalid)))
        wrong.push(`${path}: ${lines[0]} leaves out ${EXIT.ok} or ${EXIT.invalid}`);
      for (const o of cmd.options) if (!help.includes(o.flags)) wrong.push(`${path}: --help leaves out ${o.flags}`);
    }
    expect(wrong).toEqual([]);
  });

  it("names the top-level commands bin.ts keeps a code cache for (command-names.ts): each of them, no other", async () => {
    const names = (await commandTree()).commands.map((c) => c.name());
    expect([...TOP_LEVEL_COMMANDS].sort()).toEqual(names.sort());
  });
});
