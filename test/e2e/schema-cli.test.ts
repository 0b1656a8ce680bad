// `narwhal schema` as a real process: it prints exactly the committed schema
// (so `narwhal schema fleet > schemas/fleet.schema.json` regenerates it), and an
// unknown file name is a usage error (exit 1) naming the choices.
import fs from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "./cli.js";
import { REPO } from "./sim-fleet.js";

describe("narwhal schema", () => {
  it.each(["fleet", "launch"])("prints the committed schemas/%s.schema.json", async (name) => {
    const r = await runCli(["schema", name]);
    expect(r.code, r.stderr).toBe(0);
    const committed = JSON.parse(await fs.readFile(path.join(REPO, `schemas/${name}.schema.json`), "utf8")) as unknown;
    expect(JSON.parse(r.stdout)).toEqual(committed);
  });

  it("refuses an unknown file name with exit 1, naming the choices; --help names the exit codes", async () => {
    const r = await runCli(["schema", "deployment"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/Allowed choices are fleet, launch/);
    const help = await runCli(["schema", "--help"]);
    expect(help.stdout).toMatch(/Exit codes: 0 printed; 1 unknown file name/);
  });
});
