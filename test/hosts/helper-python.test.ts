// narwhal's Python helpers run through the node's python3 looked up once per host access
// (src/hosts/stdlib-python.ts), not through a version manager's shim at every run: real processes on a
// LocalHost whose PATH starts with a shim of pyenv's kind (a script that execs the interpreter), which
// counts its runs. Over ssh the same lookup is part of the HostAccess contract (test/hosts/contract.ts).
import { spawnSync } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalHost } from "../../src/hosts/local.js";
import {
  HelperPython,
  memoInFile,
  PYTHON3,
  runHelper,
  spawnHelper,
  withHelperPython,
} from "../../src/hosts/stdlib-python.js";
import type { RunResult } from "../../src/hosts/types.js";
import { modelManifest } from "../../src/phases/host/model-manifest.js";
import { until } from "./contract.js";

const SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin";
/** The interpreter the shim runs: the system's python3, as its own sys.executable names it. */
const real = spawnSync("python3", ["-c", "import sys; print(sys.executable)"], {
  env: { PATH: SYSTEM_PATH },
  encoding: "utf8",
}).stdout.trim();

let root: string;
let shims: string;
let runs: string;
beforeAll(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "nw-helper-python-"));
  shims = path.join(root, "shims");
  runs = path.join(root, "shim-runs");
  await fs.mkdir(shims);
});
afterAll(() => fs.rm(root, { recursive: true, force: true }));

/** Install `version` (a directory holding a python3 link to the real interpreter) and point the shim at it. */
async function installVersion(version: string): Promise<string> {
  const bin = path.join(root, version, "bin");
  await fs.mkdir(bin, { recursive: true });
  await fs.symlink(real, path.join(bin, "python3"));
  const shim = `#!/bin/sh\necho run >> ${runs}\nexec ${bin}/python3 "$@"\n`;
  await fs.writeFile(path.join(shims, "python3.tmp"), shim, { mode: 0o755 });
  await fs.rename(path.join(shims, "python3.tmp"), path.join(shims, "python3"));
  return path.join(bin, "python3");
}
const shimRuns = async () => (await fs.readFile(runs, "utf8").catch(() => "")).split("\n").filter(Boolean).length;

describe("the helper interpreter on a node whose python3 is a shim", () => {
  it("is looked up once for any number of helpers, also started at once, and runs them directly", async () => {
    const v1 = await installVersion("v1");
    const host = new LocalHost("node-a", { PATH: `${shims}:${SYSTEM_PATH}` });
    const model = path.join(root, "model");
    await fs.mkdir(model, { recursive: true });
    await fs.writeFile(path.join(model, "config.json"), "{}");
    const signal = new AbortController().signal;
    const manifests = await Promise.all([1, 2, 3, 4].map(() => modelManifest(host, model, { signal })));
    expect(manifests.map((m) => m.manifest.files.map((f) => f.path))).toEqual(Array(4).fill(["config.json"]));
    const r = await runHelper(host, ["-c", "import sys; print(sys.executable, sys.flags.isolated, sys.flags.no_site)"]);
    expect(r.stdout.trim()).toBe(`${v1} 1 1`);
    // One run of the shim: the lookup; its check, the four manifests and the last helper ran v1 directly.
    expect(await shimRuns()).toBe(1);
    expect(await host.helperPython.interpreter()).toBe(v1);
  });

  it("is looked up again when the interpreter it found was removed, for a run and for a detached start", async () => {
    await fs.rm(runs, { force: true });
    const v1 = await installVersion("v2-before");
    const host = new LocalHost("node-b", { PATH: `${shims}:${SYSTEM_PATH}` });
    expect(await host.helperPython.interpreter()).toBe(v1);
    // An upgrade: the version the lookup found is gone, the shim now runs another.
    await fs.rm(path.dirname(path.dirname(v1)), { recursive: true });
    const v2 = await installVersion("v2-after");
    const r = await runHelper(host, ["-c", "import sys; print(sys.executable)"]);
    expect(r).toMatchObject({ code: 0, stdout: `${v2}\n` });
    expect(await shimRuns()).toBe(2);

    await fs.rm(path.dirname(path.dirname(v2)), { recursive: true });
    const v3 = await installVersion("v2-third");
    const out = path.join(root, "spawned");
    const { pid } = await spawnHelper(
      host,
      ["-c", `import sys; open(${JSON.stringify(out)}, "w").write(sys.executable)`],
      {
        cwd: root,
        logFile: path.join(root, "spawn.log"),
      },
    );
    expect(pid).toBeGreaterThan(0);
    // The file the helper writes is the signal of its end, not a sleep.
    await until(
      "the spawned helper to write its interpreter",
      async () => (await fs.readFile(out, "utf8").catch(() => "")) === v3,
    );
    expect(await shimRuns()).toBe(3);
  });
});

describe("HelperPython's lookup", () => {
  const result = (code: number | null, stdout = ""): RunResult => ({
    code,
    signal: null,
    stdout,
    stderr: "",
    timedOut: false,
  });

  it("keeps python3 when the path the interpreter reports does not run it as itself (a wrapper it needs)", async () => {
    const seen: string[] = [];
    const python = new HelperPython(async ([exe]) => {
      seen.push(exe!);
      return exe === PYTHON3 ? result(0, "/opt/py/bin/python3.real") : result(0, "/opt/py/bin/python3");
    });
    expect(await python.interpreter()).toBe(PYTHON3);
    expect(await python.interpreter()).toBe(PYTHON3);
    expect(seen).toEqual([PYTHON3, "/opt/py/bin/python3.real"]);
  });

  it("does not remember a lookup that got no answer: a python3 installed later is found", async () => {
    let installed = false;
    const python = new HelperPython(async ([exe]) =>
      !installed ? result(127) : result(0, exe === PYTHON3 ? "/usr/bin/python3" : exe!),
    );
    expect(await python.interpreter()).toBe(PYTHON3);
    installed = true;
    expect(await python.interpreter()).toBe("/usr/bin/python3");
  });

  it("takes the answer an earlier process kept (memoInFile) without a lookup, and keeps what a lookup finds", async () => {
    const file = path.join(root, "memo", "helper-python");
    const seen: string[] = [];
    const lookup = async ([exe]: string[]) => (seen.push(exe!), result(0, exe === PYTHON3 ? "/opt/a/python3" : exe!));
    expect(await new HelperPython(lookup, memoInFile(file)).interpreter()).toBe("/opt/a/python3");
    expect(seen).toEqual([PYTHON3, "/opt/a/python3"]);
    expect(await fs.readFile(file, "utf8")).toBe("/opt/a/python3");
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    // The next process on this node: the kept answer, no command run.
    seen.length = 0;
    expect(await new HelperPython(lookup, memoInFile(file)).interpreter()).toBe("/opt/a/python3");
    expect(seen).toEqual([]);
    // A kept answer that is no path (python3 itself, a relative or multi-line one) is looked up again.
    for (const kept of ["python3", "bin/python3", "/opt/a/python3\n/x"]) {
      await fs.writeFile(file, kept);
      seen.length = 0;
      expect(await new HelperPython(lookup, memoInFile(file)).interpreter()).toBe("/opt/a/python3");
      expect(seen).toEqual([PYTHON3, "/opt/a/python3"]);
    }
  });

  it("looks up again when the kept interpreter can no longer be executed, and keeps the new answer", async () => {
    const file = path.join(root, "memo-gone", "helper-python");
    await fs.mkdir(path.dirname(file));
    await fs.writeFile(file, "/opt/removed/python3");
    const seen: string[] = [];
    const python = new HelperPython(async ([exe]) => {
      seen.push(exe!);
      return result(0, exe === PYTHON3 ? "/opt/b/python3" : exe!);
    }, memoInFile(file));
    // The helper's own run: 127 (a shell's "not found") from the kept path, then a run of the new one.
    const ran: string[] = [];
    const r = await withHelperPython(
      python,
      async (exe) => (ran.push(exe), result(exe === "/opt/removed/python3" ? 127 : 0)),
    );
    expect(r.code).toBe(0);
    expect(ran).toEqual(["/opt/removed/python3", "/opt/b/python3"]);
    expect(seen).toEqual([PYTHON3, "/opt/b/python3"]);
    expect(await fs.readFile(file, "utf8")).toBe("/opt/b/python3");
  });

  it("takes no path that is relative or spans lines", async () => {
    for (const said of ["python3", "bin/python3", "/usr/bin/python3\n/x"]) {
      const python = new HelperPython(async () => result(0, said));
      expect(await python.interpreter()).toBe(PYTHON3);
    }
  });
});
