// What a failed start is traced to, and what retrying can do about it, read
// from the simulator's real startup output (the same wording as vLLM's): the
// fixtures are the logs it prints for each failure, not strings typed here.
import { describe, expect, it } from "vitest";
import { execFile } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { diagnoseStartupLog } from "../../src/phases/start.js";
import { REPO, SIM_SITE, freePort } from "../e2e/sim-fleet.js";

const model = (name: string) => path.join(REPO, "test/sim/models", name);

/** Run the simulated vLLM server until it exits; its combined output is the startup log. */
async function startupLog(
  args: string[],
  env: Record<string, string> = {},
  port?: number,
): Promise<{ code: number | null; log: string }> {
  const p = port ?? (await freePort());
  return new Promise((resolve) => {
    execFile(
      "/usr/bin/python3",
      ["-m", "vllm.entrypoints.openai.api_server", "--host", "127.0.0.1", "--port", String(p), ...args],
      { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", PYTHONPATH: SIM_SITE, ...env }, timeout: 30_000 },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, log: `${stdout}${stderr}` }),
    );
  });
}

describe("a failed start, traced from the engine's own log", () => {
  it("is terminal at once when vLLM rejects its command line (argparse), naming runtime.extra_args", async () => {
    const { code, log } = await startupLog(["--model", model("tiny-llama"), "--bogus-flag"]);
    expect(code).toBe(2);
    expect(diagnoseStartupLog(log)).toMatchObject({
      cause: "vLLM rejected its command line",
      input: "runtime.extra_args",
      failure: "terminal",
    });
  });

  it("is terminal at once when vLLM requests trust_remote_code=True, with the seed's fix", async () => {
    const { code, log } = await startupLog(["--model", model("tiny-remote-code")]);
    expect(code).toBe(1);
    const d = diagnoseStartupLog(log);
    expect(d).toMatchObject({ cause: "vLLM exited requesting trust_remote_code=True", failure: "terminal" });
    expect(d.fix).toMatch(
      /^Retain the failed attempt's evidence, rerun discovery from the corrected approved revision into fresh outputs, prepare a new deployment run/,
    );
  });

  it("is terminal at once on the DS conv-state layout assertion, with the seed's fix", async () => {
    const { code, log } = await startupLog(["--model", model("tiny-mamba")]);
    expect(code).toBe(1);
    const d = diagnoseStartupLog(log);
    expect(d).toMatchObject({ cause: "vLLM exited requesting VLLM_SSM_CONV_STATE_LAYOUT=DS", failure: "terminal" });
    expect(d.fix).toMatch(/^Retain the failed attempt's evidence/);
  });

  it("outwaits a stranger holding the planned port", async () => {
    const stranger = net.createServer();
    await new Promise<void>((r) => stranger.listen(0, "127.0.0.1", r));
    try {
      const { code, log } = await startupLog(
        ["--model", model("tiny-llama")],
        {},
        (stranger.address() as net.AddressInfo).port,
      );
      expect(code).toBe(1);
      expect(diagnoseStartupLog(log)).toMatchObject({ cause: "a planned port is already in use", failure: "outwait" });
    } finally {
      stranger.close();
    }
  });

  it("retries a crash that may not repeat (CUDA out of memory at load)", async () => {
    const { code, log } = await startupLog(["--model", model("tiny-llama")], { NARWHAL_SIM_FAULTS: "crash_at_start" });
    expect(code).toBe(1);
    const d = diagnoseStartupLog(log);
    expect(d).toMatchObject({
      cause: expect.stringMatching(/^the engine failed on its accelerator \(/),
      failure: "retry",
    });
    // The cause quotes the log's own line, wherever in the log it is (stdout and stderr interleave).
    expect(d.cause).toMatch(/out of memory/i);
    const buried = [...log.split("\n").filter((l) => /out of memory/i.test(l)), ...Array(20).fill("INFO later")].join(
      "\n",
    );
    expect(diagnoseStartupLog(buried).cause).toMatch(/out of memory/i);
  });
});
