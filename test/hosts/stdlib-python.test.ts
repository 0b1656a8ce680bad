// narwhal's own Python helpers run isolated from the node's Python environment (src/hosts/stdlib-python.ts):
// a module on the node's PYTHONPATH that shadows the standard library, or a .pth file's import, does not
// run in them. Each helper runs for real through a LocalHost whose environment carries such a PYTHONPATH.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalHost } from "../../src/hosts/local.js";
import { ENVIRONS, LIST_PROCESSES } from "../../src/hosts/ssh-scripts.js";
import { modelManifest } from "../../src/phases/host/model-manifest.js";
import { STDLIB_PYTHON } from "../../src/hosts/stdlib-python.js";

describe("narwhal's Python helpers on a node whose PYTHONPATH shadows the standard library", () => {
  let root: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), "nw-stdlib-python-"));
    const shadow = path.join(root, "shadow");
    await fs.mkdir(shadow);
    // Imported in place of the standard library's json by any python3 that honours PYTHONPATH.
    await fs.writeFile(path.join(shadow, "json.py"), 'raise SystemExit("the shadowing json.py ran")\n');
    env = { PATH: "/usr/local/bin:/usr/bin:/bin", PYTHONPATH: shadow };
    // The control: a python3 run as before (no flags) does run it.
    const plain = spawnSync("python3", ["-c", "import json"], { env, encoding: "utf8" });
    expect(plain.stderr).toContain("the shadowing json.py ran");
  });
  afterAll(() => fs.rm(root, { recursive: true, force: true }));

  it("the model manifest is computed by the standard library's json", async () => {
    const model = path.join(root, "model");
    await fs.mkdir(model, { recursive: true });
    await fs.writeFile(path.join(model, "config.json"), "{}");
    const r = await modelManifest(new LocalHost("node-a", env), model, { signal: new AbortController().signal });
    expect(r.manifest.files.map((f) => f.path)).toEqual(["config.json"]);
  });

  it("the process-table and environment scans run over ssh answer", () => {
    const sh = (script: string, ...args: string[]) =>
      spawnSync("sh", ["-c", script, "sh", ...args], { env, encoding: "utf8" });
    const list = sh(LIST_PROCESSES, "python3");
    expect(list.stderr).toBe("");
    expect(list.stdout.split("\n").filter(Boolean).length).toBeGreaterThan(1);
    const environs = sh(ENVIRONS, "python3", "PATH", String(process.pid));
    expect(environs.stderr).toBe("");
    expect(JSON.parse(environs.stdout)).toEqual([process.pid, { PATH: process.env.PATH }]);
  });

  it("the attestation sidecar's interpreter line is the isolated one", () => {
    const r = spawnSync(
      STDLIB_PYTHON[0],
      [...STDLIB_PYTHON.slice(1), "-c", "import json, sys; print(sys.flags.isolated, sys.flags.no_site)"],
      {
        env,
        encoding: "utf8",
      },
    );
    expect(r.stdout.trim()).toBe("1 1");
  });
});
