// The test projects' PATH, with `python3` resolved past version-manager shims. pyenv's shim is a
// bash script that runs some 20 processes (pyenv-which, pyenv-version-name, readlink …) before the
// interpreter: 0.15 s of CPU per `python3` against 0.01 s direct, and a cold converge of two native
// engines runs python3 on the node four times (the port bind test, the model manifest, two
// attestation sidecars), so the shims cost about half of what narwhal itself spends. The same
// interpreter runs either way: its own sys.executable, linked into a private bin directory put first.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/** Env for the test processes, and a cleanup; the env is the caller's when python3 is already direct (or absent). */
export function directPythonEnv(env = process.env) {
  const none = { env, cleanup: () => {} };
  let found, real;
  try {
    found = execFileSync("sh", ["-c", "command -v python3"], { env, encoding: "utf8" }).trim();
    real = execFileSync(found, ["-c", "import sys; print(sys.executable)"], { env, encoding: "utf8" }).trim();
  } catch {
    return none; // no python3 on PATH: the tests that need it say so themselves
  }
  const isScript = fs.readFileSync(found).subarray(0, 2).toString() === "#!";
  if (!isScript || !path.isAbsolute(real)) return none; // a binary (or its link) already runs directly
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), "narwhal-test-bin-"));
  fs.symlinkSync(real, path.join(bin, "python3"));
  return {
    env: { ...env, PATH: `${bin}${path.delimiter}${env.PATH ?? ""}` },
    python: real,
    cleanup: () => fs.rmSync(bin, { recursive: true, force: true }),
  };
}
