// The simulator's own smoke tests (stdlib Python, test/sim): the stand-ins every other e2e test
// relies on must behave as test/sim/README.md says, or those tests prove nothing. nixl_smoke.py
// runs a prefill and a decode simulator and pulls KV between them, once per fault switch.
import { describe, expect, it } from "vitest";
import path from "node:path";
import { execFile } from "node:child_process";
import { REPO } from "./sim-fleet.js";

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

// Resolves with the exit code whatever it is: a failed expectation is read from the output, not thrown.
function runPython(script: string): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      "/usr/bin/python3",
      [path.join(REPO, "test/sim", script)],
      { cwd: REPO, timeout: 150_000, maxBuffer: 16 << 20 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : null) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

describe("simulator smoke tests", () => {
  it("nixl_smoke.py: a decode pulls a prefill's KV, and every KV fault switch has its effect", async () => {
    const run = await runPython("nixl_smoke.py");
    expect(run.stderr + run.stdout).not.toMatch(/Traceback|AssertionError/);
    expect(run.code).toBe(0);
    for (const section of [
      "prefill -> decode over the side channel",
      "kv_transfer_fail",
      "kv_handshake_refuse",
      "kv_silent_recompute",
      "kv_corrupt_blocks",
      "prefill restarts",
    ])
      expect(run.stdout).toContain(`nixl: ${section}`);
    expect(run.stdout.trimEnd().split("\n").at(-1)).toBe("nixl smoke: all passed");
  });

  it("smoke.py: the engine stand-in and check_runtime.py", async () => {
    const run = await runPython("smoke.py");
    expect(run.stderr + run.stdout).not.toMatch(/Traceback|AssertionError/);
    expect(run.code).toBe(0);
    expect(run.stdout.trimEnd().split("\n").at(-1)).toBe("smoke: all passed");
  });
});
