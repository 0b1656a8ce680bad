// The launcher digest (src/launcher.ts): over narwhal's version, every shipped script's bytes and
// the plan format; computed over temp copies of the scripts (the repo's own files are never edited),
// and carried into every input hash so a new launcher re-prepares every engine.
import { copyFile, mkdir, mkdtemp, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { packageRoot, runningLauncher } from "../../src/app.js";
import { inputHash } from "../../src/desired/hash.js";
import { loadDesired } from "../../src/desired/load.js";
import { launcherChanges, MISSING_SCRIPT, PLAN_FORMAT, readLauncher, SHIPPED_SCRIPTS } from "../../src/launcher.js";
import { validTree, writeTree } from "./fixtures.js";

/** A copy of the shipped scripts under a temp root, as readLauncher reads them. */
async function scriptCopy(): Promise<string> {
  const root = await mkdtemp(path.join(tmpdir(), "narwhal-launcher-"));
  for (const rel of SHIPPED_SCRIPTS) {
    await mkdir(path.dirname(path.join(root, rel)), { recursive: true });
    await copyFile(path.join(packageRoot(), rel), path.join(root, rel));
  }
  return root;
}

describe("launcher digest", () => {
  it("lists every Python script under src/ (each is shipped to nodes), so none escapes the digest", async () => {
    const found = (await readdir(path.join(packageRoot(), "src"), { recursive: true }))
      .filter((f) => f.endsWith(".py"))
      .map((f) => path.posix.join("src", f.split(path.sep).join("/")))
      .sort();
    expect([...SHIPPED_SCRIPTS].sort()).toEqual(found);
  });

  it("names every shipped script, and a copy of them is the running launcher", async () => {
    const running = runningLauncher();
    expect(Object.keys(running.scripts).sort()).toEqual(SHIPPED_SCRIPTS.map((s) => path.basename(s)).sort());
    expect(Object.values(running.scripts)).not.toContain(MISSING_SCRIPT);
    expect(running.plan_format).toBe(PLAN_FORMAT);
    expect(readLauncher(await scriptCopy(), running.version)).toEqual(running);
  });

  it("changes when one script's bytes change, and says which", async () => {
    const root = await scriptCopy();
    const before = readLauncher(root, "1.0.0");
    await writeFile(path.join(root, "src/phases/inspect_runtime.py"), "# another inspection\n", { flag: "a" });
    const after = readLauncher(root, "1.0.0");
    expect(after.digest).not.toBe(before.digest);
    expect(after.scripts["check_runtime.py"]).toBe(before.scripts["check_runtime.py"]);
    expect(launcherChanges(before, after)).toEqual([
      expect.stringMatching(/^inspect_runtime\.py sha256 [0-9a-f]{12} → [0-9a-f]{12}$/),
    ]);
  });

  it("changes with the version and the plan format, and a missing script is a digest of its own", async () => {
    const root = await scriptCopy();
    const base = readLauncher(root, "1.0.0");
    expect(readLauncher(root, "1.0.1").digest).not.toBe(base.digest);
    expect(readLauncher(root, "1.0.0", SHIPPED_SCRIPTS, PLAN_FORMAT + 1).digest).not.toBe(base.digest);
    expect(launcherChanges(base, readLauncher(root, "1.0.1"))).toEqual(["version 1.0.0 → 1.0.1"]);
    const missing = readLauncher(root, "1.0.0", [...SHIPPED_SCRIPTS, "src/phases/not_shipped.py"]);
    expect(missing.scripts["not_shipped.py"]).toBe(MISSING_SCRIPT);
    expect(missing.digest).not.toBe(base.digest);
    expect(launcherChanges(undefined, base)).toEqual([expect.stringMatching(/no launcher recorded/)]);
  });

  it("is in every input hash: another launcher changes every engine's hash, and the same one none", async () => {
    const dir = await writeTree(validTree());
    const ours = await loadDesired(dir);
    const again = await loadDesired(dir, { launcher: runningLauncher() });
    expect(again.specs.map((s) => s.input_hash)).toEqual(ours.specs.map((s) => s.input_hash));
    const other = await loadDesired(dir, { launcher: readLauncher(await scriptCopy(), "0.0.0-other") });
    expect(other.specs.length).toBeGreaterThan(1);
    for (const [i, spec] of other.specs.entries()) {
      expect(spec.input_hash).not.toBe(ours.specs[i]?.input_hash);
      expect(inputHash({ ...spec, launcher: ours.specs[i]!.launcher })).toBe(ours.specs[i]?.input_hash);
    }
  });
});
