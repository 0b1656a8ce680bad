// `--version` of both command trees prints the installed distribution version
// (seed 001: "--version  Print the installed distribution version."), the one
// package.json names, so an operator can tell which launcher made a plan.
import fs from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "./cli.js";
import { REPO } from "./sim-fleet.js";

describe("--version", () => {
  it("narwhal and narwhal engine print package.json's version and exit 0", async () => {
    const { version } = JSON.parse(await fs.readFile(path.join(REPO, "package.json"), "utf8")) as { version: string };
    for (const args of [["--version"], ["engine", "--version"]]) {
      const r = await runCli(args);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.trim()).toBe(version);
    }
  });
});
