// The runtime check parses the plan's complete serving command with the runtime's own vLLM
// parser (make_arg_parser on a FlexibleArgumentParser, then validate_parsed_serve_args), so a
// command the engine would reject at start fails at check. Real check script, real plan
// (buildLaunchPlan + checkInput), the simulator's vLLM as the runtime.
import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkScriptPath, packageRoot } from "../../src/app.js";
import { checkInput, parseScriptResult } from "../../src/phases/check.js";
import { buildLaunchPlan, type LaunchPlan } from "../../src/phases/plan.js";
import { engineSpec, launchRecord, planInputs, withRuntime } from "./plan-fixtures.js";

const SITE = path.join(packageRoot(), "test/sim/site");
const MODEL = path.join(packageRoot(), "test/sim/models/tiny-llama");

function nativePlan(extraArgs: string[]): LaunchPlan {
  const spec = engineSpec({
    backend: "native",
    python: "/usr/bin/python3",
    model: { dir: MODEL, config_sha256: "c".repeat(64), served_name: "tiny", revision: "r1" },
    launch: launchRecord({ backend: "native", image: undefined }),
  });
  return buildLaunchPlan(planInputs({ spec: withRuntime(spec, { extra_args: extraArgs, environment: {} }) })).plan;
}

let dir: string;
beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-check-args-"));
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

/** Run check_runtime.py on the plan's check input, in the simulator runtime, as the native backend does. */
async function runCheck(plan: LaunchPlan, command = plan.command) {
  const input = path.join(dir, `input-${Math.random().toString(16).slice(2)}.json`);
  await fs.writeFile(input, JSON.stringify({ ...checkInput(plan, "a".repeat(64)), serve_command: command }));
  const { code, stdout } = await new Promise<{ code: number; stdout: string }>((resolve) => {
    execFile(
      "/usr/bin/python3",
      [checkScriptPath(), input],
      { env: { PATH: process.env.PATH ?? "", PYTHONPATH: SITE } },
      (err, out) => {
        resolve({ code: err ? Number((err as { code?: number }).code) : 0, stdout: String(out) });
      },
    );
  });
  const result = parseScriptResult(stdout);
  expect(result, stdout).not.toBeNull();
  const argFailures = result!.failures.filter((f) => f.check === "serve_args");
  return {
    code,
    stdout,
    result: result!,
    argFailures: argFailures as Array<{ message: string; fix: string; input?: string }>,
  };
}

describe("check: the serving command, parsed as the runtime's vLLM parses it", () => {
  it("passes the launcher's command with valid extra_args (dash and underscore spellings)", async () => {
    const r = await runCheck(nativePlan(["--max_num_seqs=8", "--max-model-len", "4096", "-O3"]));
    expect(r.argFailures).toEqual([]);
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toMatch(
      /ok {3}serving command \(\d+ arguments\) parses with this runtime's vLLM api_server parser/,
    );
  });

  const rejected = [
    {
      name: "an unknown flag",
      args: ["--bogus-flag"],
      says: /unrecognized arguments: --bogus-flag/,
      flag: "--bogus-flag",
    },
    {
      name: "an unknown flag spelled with underscores and a value",
      args: ["--bogus_flag=3"],
      says: /unrecognized arguments: --bogus-flag=3/,
      flag: "--bogus-flag",
    },
    {
      name: "a known flag with a value its type refuses",
      args: ["--max-num-seqs", "many"],
      says: /argument --max-num-seqs: invalid int value: 'many'/,
      flag: "--max-num-seqs",
    },
    {
      name: "a choice the parser does not offer",
      args: ["--dtype=fp4"],
      says: /argument --dtype: invalid choice: 'fp4'/,
      flag: "--dtype",
    },
    {
      name: "flags validate_parsed_serve_args refuses together",
      args: ["--enable-auto-tool-choice"],
      says: /TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser/,
      flag: "--enable-auto-tool-choice",
    },
  ];
  for (const c of rejected) {
    it(`fails on ${c.name}, naming the flag, runtime.extra_args and the fix`, async () => {
      const r = await runCheck(nativePlan(["--max-model-len", "4096", ...c.args]));
      expect(r.code).toBe(1);
      expect(r.result.ok).toBe(false);
      expect(r.argFailures).toHaveLength(1);
      const [f] = r.argFailures;
      expect(f!.message).toMatch(
        /vLLM argument parser \(-m vllm\.entrypoints\.openai\.api_server\) rejects the serving command/,
      );
      expect(f!.message).toMatch(c.says);
      expect(f!.input).toBe("runtime.extra_args");
      expect(f!.fix).toContain(`Remove or correct ${c.flag} in runtime.extra_args`);
    });
  }

  it("blames the runtime, not extra_args, when it rejects a launcher-managed flag", async () => {
    const plan = nativePlan(["--max-model-len", "4096"]);
    // A launcher flag this runtime's parser does not know (an older vLLM would reject --kv-transfer-config so).
    const command = plan.command.map((a) => (a === "--kv-cache-dtype" ? "--kv-cache-layout" : a));
    const r = await runCheck(plan, command);
    expect(r.code).toBe(1);
    expect(r.argFailures[0]!.message).toMatch(/unrecognized arguments: --kv-cache-layout/);
    expect(r.argFailures[0]!.input).toBe("runtime vLLM version");
  });

  it("parses `vllm serve` through the CLI's serve subparser, --model moved to the positional tag", async () => {
    const plan = nativePlan(["--max-model-len", "4096"]);
    const serve = ["/opt/venv/bin/vllm", "serve", ...plan.command.slice(3)];
    expect(serve).toContain("--model");
    const ok = await runCheck(plan, serve);
    expect(ok.argFailures).toEqual([]);
    expect(ok.stdout).toMatch(/parses with this runtime's vLLM serve parser/);
    // FlexibleArgumentParser moved --model to the positional model tag, and said so (kept in the check log).
    expect(ok.stdout).toMatch(/\| .*With `vllm serve`, you should provide the model as a positional argument/);
    const bad = await runCheck(nativePlan(["--bogus-flag"]), [
      "/opt/venv/bin/vllm",
      "serve",
      ...nativePlan(["--bogus-flag"]).command.slice(3),
    ]);
    expect(bad.argFailures[0]!.message).toMatch(
      /\(vllm serve\) rejects the serving command: unrecognized arguments: --bogus-flag/,
    );
    expect(bad.argFailures[0]!.input).toBe("runtime.extra_args");
  });

  it("refuses a command that starts no vLLM entry point", async () => {
    const plan = nativePlan([]);
    const r = await runCheck(plan, ["/bin/sh", "-c", "touch /tmp/x"]);
    expect(r.argFailures[0]!.message).toMatch(/starts no vLLM entry point/);
  });
});
