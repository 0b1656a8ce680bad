// `narwhal completion bash`: the script, loaded into a real bash, completes
// commands, subcommands, options and option choices at a few prefixes, the way
// bash calls it (COMP_WORDS/COMP_CWORD set, then the function); every command
// `narwhal --help` lists is offered. zsh runs the same script through
// bashcompinit, checked only where zsh is installed.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli } from "./cli.js";

const run = promisify(execFile);
let script = "";

/** What the completion offers for a command line whose last word is being completed. */
async function complete(words: string[]): Promise<string[]> {
  const quoted = words.map((w) => `'${w}'`).join(" ");
  const { stdout } = await run("bash", [
    "-c",
    `${script}\nCOMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _narwhal; printf '%s\\n' "\${COMPREPLY[@]}"`,
  ]);
  return stdout.split("\n").filter(Boolean).sort();
}

const commandsOf = (help: string) =>
  [...(help.split("Commands:")[1] ?? "").matchAll(/^ {2}([a-z-]+)/gm)].map((m) => m[1]!).sort();

describe("narwhal completion", () => {
  beforeAll(async () => {
    const r = await runCli(["completion", "bash"]);
    expect(r.code, r.stderr).toBe(0);
    script = r.stdout;
  });

  it("completes commands, subcommands, options and choices", async () => {
    expect(await complete(["narwhal", "rec"])).toEqual(["reconcile"]);
    expect(await complete(["narwhal", "reconcile", "--m"])).toEqual(["--metrics-address"]);
    expect(await complete(["narwhal", "status", "--format", ""])).toEqual(["json", "text", "yaml"]);
    // An option's value is skipped when finding the subcommand: "plan" is still the command.
    expect(await complete(["narwhal", "plan", "--state", "s", "--o"])).toEqual(["--out"]);
    expect(await complete(["narwhal", "engine", "start"])).toEqual(["start", "start-shared"]);
    expect(await complete(["narwhal", "-"])).toEqual(["--help", "--version", "-h"]);
  });

  it("offers every command narwhal --help and narwhal engine --help list", async () => {
    const root = commandsOf((await runCli(["--help"])).stdout);
    expect(root).toContain("engine");
    expect(await complete(["narwhal", ""])).toEqual(root);
    const engine = commandsOf((await runCli(["engine", "--help"])).stdout);
    expect(engine.length).toBeGreaterThan(5);
    expect(await complete(["narwhal", "engine", ""])).toEqual(engine);
  });

  it("refuses a shell it does not know (exit 1)", async () => {
    const r = await runCli(["completion", "fish"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("bash, zsh");
  });

  it("loads in zsh where zsh is installed", async (ctx) => {
    const zsh = await run("zsh", ["--version"]).catch(() => null);
    if (!zsh) {
      console.log("skipped: zsh is not installed");
      return ctx.skip();
    }
    const r = await runCli(["completion", "zsh"]);
    await run("zsh", ["-c", `${r.stdout}\n(( $+functions[_narwhal] ))`]);
  });
});
