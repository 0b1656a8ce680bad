// A GGUF checkpoint on the native runtime (seed 001): NARWHAL_MODEL_PATH selects
// the file inside its snapshot directory, preparation records its SHA-256, the
// plan pins vllm-gguf-plugin and passes the base tokenizer and configuration.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import path from "node:path";
import { createHash } from "node:crypto";
import { REPO } from "./sim-fleet.js";
import { engineFleet, readJson, type EngineFleet } from "./engine-fleet.js";
import { engineProcesses, teardown } from "./cli.js";

const BASE = path.join(REPO, "test/sim/models/tiny-llama");
const PINS = { vllm: "0.11.0", nixl: "0.6.1", "vllm-gguf-plugin": "0.1.0" };

describe("narwhal engine with a GGUF model", () => {
  let f: EngineFleet;
  let gguf: string;

  beforeAll(async () => {
    const base = { expectedPackages: PINS, extraArgs: ["--tokenizer", BASE, "--hf-config-path", BASE] };
    f = await engineFleet({ engines: [base, base] });
    // A snapshot directory: the GGUF file with its companion config (same bytes as the base model's).
    const snapshot = path.join(path.dirname(f.dir), "snapshot");
    await fs.mkdir(snapshot);
    gguf = path.join(snapshot, "tiny-llama.Q8_0.gguf");
    await fs.copyFile(path.join(REPO, "test/sim/models/tiny-llama-gguf/tiny-llama.Q8_0.gguf"), gguf);
    await fs.copyFile(path.join(BASE, "config.json"), path.join(snapshot, "config.json"));
    const envFile = path.join(f.dir, "deployment.env");
    await fs.writeFile(
      envFile,
      (await fs.readFile(envFile, "utf8")).replace(/^NARWHAL_MODEL_DIR=.*$/m, `NARWHAL_MODEL_DIR=${snapshot}`),
    );
  });
  afterAll(async () => {
    for (const p of await engineProcesses(f.stateDir)) process.kill(-p.pid, "SIGKILL");
    await teardown(f.stateDir);
  });

  it("prepares with the file's SHA-256, checks the plugin pin, and serves it", async () => {
    const out = await f.prepared("gguf", "engine-1", { NARWHAL_MODEL_PATH: gguf });
    const plan = await readJson(path.join(out, "launch.json"));
    expect(plan.model).toMatchObject({
      path: gguf,
      file_sha256: createHash("sha256")
        .update(await fs.readFile(gguf))
        .digest("hex"),
    });
    expect(plan.command.slice(plan.command.indexOf("--model"), plan.command.indexOf("--model") + 2)).toEqual([
      "--model",
      gguf,
    ]);
    expect(plan.command.join(" ")).toContain(`--tokenizer ${BASE} --hf-config-path ${BASE}`);
    expect((await readJson(path.join(out, "checked.json"))).packages).toMatchObject({ "vllm-gguf-plugin": "0.1.0" });
    const started = await f.engine(["start", "--run", out], { NARWHAL_MODEL_PATH: gguf });
    expect(started.code, started.stderr).toBe(0);
    expect(JSON.parse(started.stdout).details.process.args).toContain(gguf);
    expect((await f.engine(["stop-native", "--run", out])).code).toBe(0);
  });

  it("refuses a GGUF record without the plugin pin before creating --out", async () => {
    const record = await f.roleRecord(
      "engine-1",
      (r) => (r.runtime.expected_packages = { vllm: "0.11.0", nixl: "0.6.1" }),
    );
    const out = path.join(f.runs, "no-plugin");
    const r = await f.engine(["prepare", "--desired", f.dir, "--engine", "engine-1", "--out", out], {
      NARWHAL_MODEL_PATH: gguf,
      NARWHAL_ENGINE_LAUNCH_CONFIG: record,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/vllm-gguf-plugin pinned in runtime.expected_packages/);
    await expect(fs.access(out)).rejects.toThrow();
  });
});
