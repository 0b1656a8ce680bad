// examples/systemd: the unit runs watch mode with the env file's directories,
// restarts on failure, stops with SIGTERM and signals only narwhal itself (so
// engines keep running), and passes `systemd-analyze verify` where systemd is
// installed. That SIGTERM of watch mode leaves native engines running is
// test/e2e/watch-native.test.ts "exits 0 on SIGTERM and leaves the engines running".
import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { REPO } from "../e2e/sim-fleet.js";

const DIR = path.join(REPO, "examples/systemd");
const run = promisify(execFile);

/** The [Service] directives of a unit file, by name (the last one wins, as systemd reads them). */
function directives(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split("\n")
      .filter((l) => /^[A-Za-z_]+=/.test(l))
      .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
  );
}

async function systemdAnalyze(): Promise<string | null> {
  try {
    await run("systemd-analyze", ["--version"]);
    return "systemd-analyze";
  } catch {
    return null;
  }
}

describe("examples/systemd", () => {
  it("runs watch mode from the env file, restarts on failure, and stops only narwhal with SIGTERM", async () => {
    const unit = directives(await fs.readFile(path.join(DIR, "narwhal.service"), "utf8"));
    expect(unit.ExecStart).toMatch(/\/narwhal reconcile$/); // watch mode: no --once
    expect(unit.Restart).toBe("on-failure");
    expect(unit.KillSignal).toBe("SIGTERM");
    expect(unit.KillMode).toBe("process");
    expect(unit.EnvironmentFile).toBe("/etc/narwhal/narwhal.env");
    const env = directives(await fs.readFile(path.join(DIR, "narwhal.env"), "utf8"));
    expect(Object.keys(env)).toEqual(expect.arrayContaining(["NARWHAL_DESIRED", "NARWHAL_STATE"]));
  });

  it("passes systemd-analyze verify", async (ctx) => {
    const analyze = await systemdAnalyze();
    if (!analyze) {
      console.log("skipped: systemd-analyze is not installed (apt-get install systemd provides it)");
      return ctx.skip();
    }
    // verify checks that ExecStart is executable: point it at this clone's node and CLI.
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-unit-"));
    const text = (await fs.readFile(path.join(DIR, "narwhal.service"), "utf8")).replace(
      /^ExecStart=\S+/m,
      `ExecStart=${process.execPath} ${path.join(REPO, "dist/bundle/main.js")}`,
    );
    const file = path.join(dir, "narwhal.service");
    await fs.writeFile(file, text);
    const r = await run(analyze, ["verify", file]).then(
      (ok) => ({ code: 0, stderr: ok.stderr }),
      (err: { code: number; stderr: string }) => ({ code: err.code, stderr: err.stderr }),
    );
    // Lines about other units of this host (its own /etc/systemd) are not this unit's.
    const ours = r.stderr.split("\n").filter((l) => l.includes("narwhal.service"));
    expect({ code: r.code, ours }).toEqual({ code: 0, ours: [] });
    await fs.rm(dir, { recursive: true, force: true });
  });
});
