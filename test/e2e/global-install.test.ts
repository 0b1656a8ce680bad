// `npm pack` of this clone holds the built CLI and the Python scripts narwhal runs on nodes; `npm install -g`
// of the tarball into a temporary prefix gives a `narwhal` that works from any directory. Cheap enough for
// every `npm test` (about 12 s on the shared two-core machine; it was opt-in at 2-5 minutes): the pack skips
// `prepare` (dist/ is already built, as every e2e test's CLI is: npm test type-checks and builds first), and
// the install prefers the npm cache `npm ci` filled, without audit, fund or install scripts (ssh2's
// optional native crypto build, which falls back to JavaScript). Prefer, not only: `npm ci` caches the
// lockfile's tarballs but not the registry's package documents an install of a tarball resolves its
// dependencies with, so on a fresh machine `--offline` failed with ENOTCACHED (chokidar).
import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO } from "./sim-fleet.js";

const run = promisify(execFile);
const FAST = ["--ignore-scripts", "--no-audit", "--no-fund"];

describe("installing narwhal globally", () => {
  let dir = "";
  let narwhal = "";
  let elsewhere = "";
  let files: string[] = [];

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-install-"));
    // Without prepare nothing builds dist/: a clone that was never built would pack a package without its CLI.
    await fs.access(path.join(REPO, "dist/bundle/main.js")).catch(() => {
      throw new Error(`${REPO}/dist is not built: run npm run build (npm test builds it before the tests)`);
    });
    // A run leaves its V8 code cache beside the bundle (src/cli/bin.ts): one is there to be left out of the package.
    await run(process.execPath, [path.join(REPO, "dist/bundle/main.js"), "--version"], { cwd: REPO });
    const { stdout } = await run("npm", ["pack", "--json", ...FAST, "--pack-destination", dir], { cwd: REPO });
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf("["))) as Array<{
      name: string;
      filename: string;
      files: Array<{ path: string }>;
    }>;
    expect(packed!.name).toBe("@narwhal-fleet/narwhal");
    files = packed!.files.map((f) => f.path);
    const prefix = path.join(dir, "prefix");
    await run(
      "npm",
      ["install", "-g", "--prefer-offline", ...FAST, "--prefix", prefix, path.join(dir, packed!.filename)],
      {
        cwd: dir,
        timeout: 90_000,
      },
    );
    narwhal = path.join(prefix, "bin", "narwhal");
    elsewhere = await fs.mkdtemp(path.join(dir, "cwd-"));
  }, 120_000);
  afterAll(() => (dir ? fs.rm(dir, { recursive: true, force: true }) : undefined));

  it("packs the CLI bundle, the .py files and the examples, and nothing of test/ or of tsc's dist/src", () => {
    expect(files).toEqual(
      expect.arrayContaining([
        "dist/bundle/main.js",
        "src/phases/check_runtime.py",
        "src/phases/inspect_runtime.py",
        "src/phases/attestation_serve.py",
        "src/phases/host/model_manifest.py",
        "examples/container-sim/fleet.json",
      ]),
    );
    expect(files.some((f) => f.startsWith("test/"))).toBe(false);
    // Code caches are made by the node that runs the package, beside its own copy, not shipped from here.
    expect(files.filter((f) => f.includes("code-cache"))).toEqual([]);
    // The bundle holds narwhal's code: the tsc build is for type-checking and tests, not shipped.
    expect(files.some((f) => f.startsWith("dist/src/") || f.startsWith("dist/machines/"))).toBe(false);
  });

  it("runs --version, --help and completion from another directory", async () => {
    const { version } = JSON.parse(await fs.readFile(path.join(REPO, "package.json"), "utf8")) as { version: string };
    const r = await run(narwhal, ["--version"], { cwd: elsewhere });
    expect(r.stdout.trim()).toBe(version);
    const help = await run(narwhal, ["--help"], { cwd: elsewhere });
    expect(help.stdout).toMatch(/^Usage: narwhal /);
    for (const command of ["validate", "reconcile", "status", "logs"]) expect(help.stdout).toContain(`  ${command}`);
    // The installed copy finds its own package root by the scoped name (app.ts), and its command tree.
    const v = await run(narwhal, ["completion", "bash"], { cwd: elsewhere });
    expect(v.stdout).toContain("complete -o default -F _narwhal narwhal");
  });

  it("validates an example copied to ./desired of another directory (exit 0)", async () => {
    const installed = path.join(path.dirname(path.dirname(narwhal)), "lib/node_modules/@narwhal-fleet/narwhal");
    await fs.cp(path.join(installed, "examples/container-sim"), path.join(elsewhere, "desired"), { recursive: true });
    const r = await run(narwhal, ["validate"], { cwd: elsewhere });
    expect(r.stdout).toContain(`desired state in ${path.join(elsewhere, "desired")} is valid: 2 engines`);
  });
});
