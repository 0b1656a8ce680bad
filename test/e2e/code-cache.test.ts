// The executable's V8 code cache (src/cli/bin.ts) changes how fast the CLI starts, never what it does: a
// copy of the built package (package.json, dist/bundle) runs as a real process. Its cache of a command is
// made once, by a run that did the command's work, one per set of V8 flags, and then used (not rewritten);
// reconcile's no-op makes its own in place of a converge's; a cache that is garbage, or was made for a
// bundle of the same length but other text (V8's own check compares lengths only), is not run; where no
// cache can be written (a read-only install) the CLI runs the same and prints nothing about it.
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO, simFleet } from "./sim-fleet.js";
import { collect, type CliResult } from "./cli.js";

let pkg: string;
let bundle: string;
let cacheDir: string;

beforeAll(async () => {
  pkg = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-code-cache-"));
  bundle = path.join(pkg, "dist/bundle");
  cacheDir = path.join(bundle, "code-cache");
  await fs.copyFile(path.join(REPO, "package.json"), path.join(pkg, "package.json"));
  await fs.cp(path.join(REPO, "dist/bundle"), bundle, {
    recursive: true,
    filter: (src) => !src.includes(`${path.sep}code-cache`),
  });
  // The host scripts the package ships (package.json "files"): reconcile's inspect runs them from there.
  await fs.cp(path.join(REPO, "src"), path.join(pkg, "src"), {
    recursive: true,
    filter: (src) => !src.endsWith(".ts"),
  });
});

afterAll(async () => {
  await fs.rm(pkg, { recursive: true, force: true });
});

/**
 * The copy's `narwhal ARGS` (node run with `nodeFlags`), in a clean environment (the caches V8 accepts depend on
 * node's flags); with
 * `readOnly`, in a private mount namespace where its dist/bundle is a read-only bind mount (root cannot write
 * there either: an install the running user does not own).
 */
function narwhal(args: string[], { readOnly = false, nodeFlags = [] as string[] } = {}): Promise<CliResult> {
  const argv = [process.execPath, ...nodeFlags, path.join(bundle, "main.js"), ...args];
  const [file, ...rest] = readOnly
    ? ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$1" "$1" && shift && exec "$@"', "sh", bundle, ...argv]
    : argv;
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
  return collect(spawn(file!, rest, { env, stdio: ["ignore", "pipe", "pipe"] }));
}

/**
 * The cache files of COMMAND with their modification times and sizes: those made by runs that ran no engine
 * steps, or (`steps`) those made by runs that did.
 */
async function caches(
  command: string,
  kind: "light" | "steps" = "light",
): Promise<Array<{ name: string; mtimeMs: number; size: number }>> {
  const names = await fs.readdir(cacheDir).catch(() => [] as string[]);
  const mine = names.filter((n) => n.endsWith(`-${command}${kind === "steps" ? ".steps" : ""}.bin`));
  return Promise.all(
    mine.map(async (name) => {
      const st = await fs.stat(path.join(cacheDir, name));
      return { name, mtimeMs: st.mtimeMs, size: st.size };
    }),
  );
}

describe("the executable's code cache", () => {
  it("is not made by a run that does not stand for its command: its --help, or input it refuses", async () => {
    const fleet = await simFleet();
    expect((await narwhal(["validate", "--help"])).code).toBe(0);
    await fs.writeFile(path.join(fleet.dir, "fleet.json"), "{ not json");
    expect((await narwhal(["validate", "--desired", fleet.dir])).code).toBe(1);
    expect(await caches("validate")).toEqual([]);
  });

  it("keeps one per set of V8 flags that decide whether V8 takes it, each then used as it is", async () => {
    const flags = ["--max-old-space-size=300"];
    expect((await narwhal(["schema", "fleet"])).code).toBe(0);
    expect((await narwhal(["schema", "fleet"], { nodeFlags: flags })).code).toBe(0);
    const both = await caches("schema");
    expect(both.length, "a cache for each set of flags").toBe(2);
    expect((await narwhal(["schema", "fleet"])).code).toBe(0);
    expect((await narwhal(["schema", "fleet"], { nodeFlags: flags })).code).toBe(0);
    expect(await caches("schema")).toEqual(both); // neither rejected the other's and rewrote it
  });

  it("is made once per command, then used as it is; garbage in its place is rejected and replaced", async () => {
    const fleet = await simFleet();
    const first = await narwhal(["validate", "--desired", fleet.dir]);
    expect(first.code, first.stderr).toBe(0);
    const made = await caches("validate");
    expect(made.length, "one cache for validate").toBe(1);
    expect(made[0]!.size).toBeGreaterThan(10_000);

    const second = await narwhal(["validate", "--desired", fleet.dir]);
    expect(second).toEqual(first);
    // Accepted: a rejected cache would have been written again.
    expect(await caches("validate")).toEqual(made);

    // Another command has a cache of its own.
    expect((await narwhal(["--help"])).code).toBe(0);
    expect((await caches("narwhal")).length).toBe(1);
    expect(await caches("validate")).toEqual(made);

    const file = path.join(cacheDir, made[0]!.name);
    await fs.writeFile(file, Buffer.alloc(made[0]!.size, 0x5a));
    const third = await narwhal(["validate", "--desired", fleet.dir]);
    expect(third).toEqual(first);
    const replaced = await fs.readFile(file);
    expect(replaced.length).toBeGreaterThan(10_000);
    expect(replaced.every((b) => b === 0x5a)).toBe(false);
  });

  it("of reconcile: one made by a run that ran steps serves until a no-op, whose own serves every run after", async () => {
    const fleet = await simFleet();
    const args = ["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir];
    const run = async () => {
      const r = await narwhal(args);
      expect(r.code, r.stderr).toBe(0);
    };
    try {
      await run(); // a cold converge: every step of both engines
      const steps = await caches("reconcile", "steps");
      expect(steps.length, "a steps cache").toBe(1);
      expect(await caches("reconcile")).toEqual([]);

      // A no-op takes it and removes it (a cache it made would carry every step's functions); the next no-op
      // compiles and makes its own, smaller: V8 takes it first from then on.
      await run();
      expect(await caches("reconcile", "steps")).toEqual([]);
      expect(await caches("reconcile")).toEqual([]);
      await run();
      const light = await caches("reconcile");
      expect(light.length, "a no-op's cache").toBe(1);
      expect(light[0]!.size).toBeGreaterThan(10_000);
      expect(light[0]!.size).toBeLessThan(steps[0]!.size);
      await run();
      expect(await caches("reconcile")).toEqual(light);

      // A run that ran steps again (a changed engine restarts) takes the no-op's cache and makes none.
      await fleet.write({ engines: [{ extraArgs: ["--max-num-seqs", "16"] }, {}] });
      await run();
      expect(await caches("reconcile")).toEqual(light);
      expect(await caches("reconcile", "steps")).toEqual([]);
    } finally {
      await narwhal(["down", "--desired", fleet.dir, "--state", fleet.stateDir]);
    }
  });

  it("of a bundle whose text changed but not its length is not run: the new text is", async () => {
    expect((await narwhal(["--help"])).stdout).toContain("A declarative reconciler for vLLM inference fleets");
    const before = await caches("narwhal");
    expect(before.length).toBe(1);
    const cli = path.join(bundle, "cli.cjs");
    const text = await fs.readFile(cli, "utf8");
    const edited = text.replace(
      "A declarative reconciler for vLLM inference fleets",
      "A DECLARATIVE reconciler for vLLM inference fleets",
    );
    expect(edited.length).toBe(text.length);
    expect(edited).not.toBe(text);
    await fs.writeFile(cli, edited);
    try {
      const r = await narwhal(["--help"]);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain("A DECLARATIVE reconciler");
      // The new bundle's cache replaced the old one's (a bundle's caches are named by a digest of its text).
      const after = await caches("narwhal");
      expect(after.length).toBe(1);
      expect(after[0]!.name).not.toBe(before[0]!.name);
    } finally {
      await fs.writeFile(cli, text);
    }
  });

  it("that cannot be written: the command runs the same and says nothing about it", async () => {
    await fs.rm(cacheDir, { recursive: true, force: true });
    const r = await narwhal(["--version"], { readOnly: true });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    // Nothing was written: no cache, no temp file of one.
    await expect(fs.access(cacheDir)).rejects.toThrow("ENOENT");
    expect(await fs.readdir(bundle)).toEqual(
      await fs.readdir(path.join(REPO, "dist/bundle")).then((n) => n.filter((f) => f !== "code-cache")),
    );
    // The same run where it can be written makes one.
    expect((await narwhal(["--version"])).code).toBe(0);
    expect((await caches("narwhal")).length).toBe(1);
  });
});
