// `narwhal engine <action>` against the simulator on the native backend: every
// action's files and key fields, and the refusals (reused --out, an existing
// output file, a changed plan hash, registration sources, --run counts, an
// allowance exceeded by 0.01, cleanup after a failed shared start).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import net from "node:net";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { engineFleet, readJson, SHARED_GPU, type EngineFleet } from "./engine-fleet.js";
import { createHash } from "node:crypto";
import { engineProcesses, runCli, startCli, teardown, waitFor } from "./cli.js";
import { httpRequest } from "../../src/phases/http.js";
import { assertPrivateTree } from "./campaign.js";
import { ENGINE_ACTIONS } from "../../src/cli/engine/command.js";

const squash = (s: string) => s.replace(/\s+/g, " ");
// vllm/config/utils.py hash_factors, verbatim in effect: sha256 of json.dumps(factors, sort_keys=True).
const PY_HASH_FACTORS =
  "import hashlib, json, sys; print(hashlib.sha256(json.dumps(json.load(sys.stdin), sort_keys=True).encode()).hexdigest())";

describe("narwhal engine on the native backend", () => {
  let f: EngineFleet;
  const run: Record<string, string> = {};
  const ok = (r: { code: number | null; stdout: string; stderr: string }) => {
    expect(r.code, r.stderr).toBe(0);
    const result = JSON.parse(r.stdout);
    expect(result).toMatchObject({ schema: "narwhal.engine-result/v1", ok: true });
    return result;
  };

  beforeAll(async () => {
    f = await engineFleet();
    // Every plan is prepared before anything listens: inspection checks the planned ports are free.
    run.main = await f.prepared("e1-main", "engine-1");
    run.layout = await f.prepared("e1-layout", "engine-1");
    run.changed = await f.prepared("e1-changed", "engine-1");
    run.s1 = await f.prepared("e1-shared", "engine-1");
    run.s2 = await f.prepared("e2-shared", "engine-2");
    run.o1 = await f.prepared("e1-over", "engine-1");
    run.l1 = await f.prepared("e1-listen", "engine-1");
    run.l2 = await f.prepared("e2-listen", "engine-2");
    // A role shell's record whose share is 0.01 more than the allowance leaves.
    const over = await f.roleRecord("engine-2", (r) => (r.shared_device.gpu_memory_utilization = "0.21"));
    run.o2 = await f.prepared("e2-over", "engine-2", { NARWHAL_ENGINE_LAUNCH_CONFIG: over });
    // The same runtime environment for both (one group); the simulator crashes only engine-2.
    const crash2 = { NARWHAL_ENGINE_ENV: '{"NARWHAL_SIM_FAULTS":"crash_at_start@engine-2"}' };
    run.f1 = await f.prepared("e1-fail", "engine-1", crash2);
    run.f2 = await f.prepared("e2-fail", "engine-2", crash2);
    // engine-2 takes 2 MiB more than its share: 8155 + 16311 + 2 = 24468 MiB > 0.3 x 81559 = 24467.7 MiB.
    const greedy2 = { NARWHAL_ENGINE_ENV: '{"NARWHAL_SIM_FAULTS":"gpu_extra_mib=2@engine-2"}' };
    run.g1 = await f.prepared("e1-greedy", "engine-1", greedy2);
    run.g2 = await f.prepared("e2-greedy", "engine-2", greedy2);
  });
  afterAll(async () => {
    for (const p of await engineProcesses(f.stateDir)) process.kill(-p.pid, "SIGKILL");
    await teardown(f.stateDir);
  });

  it("lists every action with the seed's wording in `narwhal engine --help`", async () => {
    const r = await runCli(["engine", "--help"]);
    expect(r.code).toBe(0);
    for (const [name, , what] of ENGINE_ACTIONS) {
      expect(r.stdout).toContain(`  ${name} [options]`);
      expect(squash(r.stdout)).toContain(what);
    }
  });

  it("prepare writes launch.json and the backend environment, and refuses a reused --out", async () => {
    const plan = await readJson(path.join(run.main!, "launch.json"));
    expect(plan).toMatchObject({
      engine: "engine-1",
      backend: "native",
      model: { revision: "sim-0001", file_sha256: null },
    });
    expect(plan.launch_record.shared_device).toEqual({
      gpu_uuid: SHARED_GPU,
      device_allowance: "0.3",
      gpu_memory_utilization: "0.1",
    });
    expect(plan.command.join(" ")).toContain("--gpu-memory-utilization 0.1");
    expect((await fs.stat(path.join(run.main!, "engine.env"))).mode & 0o777).toBe(0o600);
    // `--out runs/<name>` (the README's own example): runs/ is created private, and so is every file of the prepared and checked run.
    expect((await fs.stat(f.runs)).mode & 0o777).toBe(0o700);
    expect(await assertPrivateTree(run.main!)).toBeGreaterThanOrEqual(5);
    const again = await f.engine(["prepare", "--desired", f.dir, "--engine", "engine-1", "--out", run.main!]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already exists/);
    expect(again.stderr).toMatch(/fresh --out/);
  });

  it("prepare validates every record before creating --out, and reads NARWHAL_ENGINE_LAUNCH_CONFIG", async () => {
    const bad = path.join(f.runs, "never");
    const invalid = await f.engine(["prepare", "--desired", f.dir, "--engine", "engine-2", "--out", bad], {
      NARWHAL_ENGINE_ARGS: "--port 1234",
    });
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/NARWHAL_ENGINE_ARGS sets --port/);
    await expect(fs.access(bad)).rejects.toThrow();

    const file = await f.roleRecord("engine-2", (r) => (r.runtime.extra_args = ["--max-num-seqs", "8"]));
    const out = path.join(f.runs, "e2-role-shell");
    const result = ok(
      await f.engine(["prepare", "--desired", f.dir, "--out", out], {
        NARWHAL_ENGINE_LAUNCH_CONFIG: file,
        NARWHAL_MODEL_REVISION: "sim-0002",
      }),
    );
    expect(result).toMatchObject({ action: "prepare", engine: "engine-2", run: out, details: { record_source: file } });
    const plan = await readJson(path.join(out, "launch.json"));
    expect(plan.command.join(" ")).toContain("--max-num-seqs 8");
    expect(plan.model.revision).toBe("sim-0002"); // the startup environment wins over deployment.env
  });

  it("check binds checked.json, appends repeats to the log, and refuses a changed plan hash", async () => {
    const first = await readJson(path.join(run.main!, "checked.json"));
    const again = ok(await f.engine(["check", "--run", run.main!]));
    expect(again.details.attempts).toBe(2);
    expect(await readJson(path.join(run.main!, "checked.json"))).toEqual(first);

    const planFile = path.join(run.changed!, "launch.json");
    await fs.chmod(planFile, 0o644);
    await fs.appendFile(planFile, " ");
    for (const action of ["check", "start"]) {
      const r = await f.engine([action, "--run", run.changed!]);
      expect(r.code, action).toBe(1);
      expect(r.stderr).toMatch(/A changed launch-plan hash requires a fresh prepared run/);
    }
  });

  it("check records nixl-compat.json: vLLM's compatibility inputs (the --model string) and vLLM's own hash", async () => {
    const plan = await readJson(path.join(run.main!, "launch.json"));
    const checked = await readJson(path.join(run.main!, "checked.json"));
    const compat = await readJson(path.join(run.main!, "nixl-compat.json"));
    const model = plan.command[plan.command.indexOf("--model") + 1];
    expect(model).not.toBe(plan.model.served_name);
    expect(compat).toMatchObject({ schema: "narwhal.nixl-compat/v1", engine: "engine-1", unknown: [] });
    // The simulator's tiny-llama config.json and its NixlConnector module (NIXL_CONNECTOR_VERSION = 1).
    expect(compat.inputs).toEqual({
      vllm_version: checked.vllm_api_version,
      nixl_connector_version: 1,
      model,
      dtype: "torch.bfloat16",
      num_kv_heads: 2,
      head_size: 64,
      num_hidden_layers: 4,
      attn_backend_name: "FLASH_ATTN",
      cache_dtype: "auto",
      cross_layers_blocks: false,
    });
    expect(compat.attn_backend_source).toBe("platform default");
    // The hash as vLLM's hash_factors computes it, by Python itself.
    const py = spawnSync("python3", ["-c", PY_HASH_FACTORS], {
      input: JSON.stringify(compat.inputs),
      encoding: "utf8",
    });
    expect(py.stderr).toBe("");
    expect(compat.hash).toBe(py.stdout.trim());
    // Private like every file of the run.
    expect((await fs.stat(path.join(run.main!, "nixl-compat.json"))).mode & 0o777).toBe(0o600);
  });

  it("model-dimensions and handshake-policy inspect the checked runtime, once per run", async () => {
    const dims = ok(await f.engine(["model-dimensions", "--run", run.main!]));
    expect(dims.details).toMatchObject({
      num_hidden_layers: 4,
      num_kv_heads: 2,
      head_size: 64,
      dtype: "bfloat16",
      tensor_parallel_size: 1,
      block_size: 16,
    });
    expect(await readJson(path.join(run.main!, "model-dimensions.json"))).toMatchObject({
      schema: "narwhal.model-dimensions/v1",
      num_kv_heads: 2,
    });
    const policy = ok(await f.engine(["handshake-policy", "--run", run.main!]));
    // One piece of code: the inputs and hash of nixl-compat.json (check), from what the installed worker reports.
    const compat = await readJson(path.join(run.main!, "nixl-compat.json"));
    expect(policy.details.compatibility).toEqual(compat.inputs);
    expect(policy.details.compatibility).toMatchObject({
      model: expect.stringContaining("tiny-llama"),
      attn_backend_name: "FLASH_ATTN",
    });
    expect(policy.details.compatibility_hash).toBe(compat.hash);
    expect(policy.details.compatibility_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(policy.details.nixl).toMatchObject({ distribution: "nixl", version: "0.6.1" });

    const repeat = await f.engine(["model-dimensions", "--run", run.main!]);
    expect(repeat.code).toBe(1);
    expect(repeat.stderr).toMatch(/model-dimensions.json already exists.*fresh prepared directory/s);
  });

  it("start, capture-cache, cache-registration and stop-native", async () => {
    const started = ok(await f.engine(["start", "--run", run.main!]));
    const handle = await readJson(path.join(run.main!, "native-process.json"));
    expect(started.details.handle).toEqual(handle);
    expect(started.details.process.args).toContain("--gpu-memory-utilization");

    const captured = ok(await f.engine(["capture-cache", "--run", run.main!]));
    expect(captured.details.layout).toMatchObject({ engine: "engine-1", block_size: 16, tensor_parallel_size: 1 });
    const layout = await readJson(path.join(run.main!, "cache-layout.json"));

    const neither = await f.engine(["cache-registration", "--run", run.main!]);
    expect(neither.code).toBe(1);
    expect(neither.stderr).toMatch(/choose one registration source/);
    const both = await f.engine([
      "cache-registration",
      "--run",
      run.main!,
      "--startup-log",
      path.join(run.main!, "engine.log"),
      "--runtime-layout",
      path.join(run.main!, "cache-layout.json"),
    ]);
    expect(both.code).toBe(1);
    expect(both.stderr).toMatch(/exclusive/);

    const fromLog = ok(
      await f.engine(["cache-registration", "--run", run.main!, "--startup-log", path.join(run.main!, "engine.log")]),
    );
    expect(fromLog.details).toMatchObject({
      source: { kind: "startup-log" },
      layout: { num_gpu_blocks: layout.num_gpu_blocks, block_size: 16 },
      block_grouping: [{ kind: "full_attention", layers: [0, 1, 2, 3] }],
    });
    // 2 (K, V) x 16 tokens x 2 KV heads x 64 x 2 bytes per block and layer.
    expect(fromLog.details.registration[0]).toMatchObject({
      page_size_bytes: 8192,
      bytes_per_rank: 8192 * layout.num_gpu_blocks * 4,
    });
    const fromLayout = ok(
      await f.engine([
        "cache-registration",
        "--run",
        run.layout!,
        "--runtime-layout",
        path.join(run.main!, "cache-layout.json"),
      ]),
    );
    expect(fromLayout.details.bytes_per_rank).toBe(fromLog.details.bytes_per_rank);

    // native-capture binds the attestation to the running process and the run's evidence, byte for byte.
    const attested = ok(await f.engine(["native-capture", "--run", run.main!]));
    const attFile = path.join(run.main!, "attestation.json");
    const att = await readJson(attFile);
    expect(attested.details.attestation).toEqual(att);
    const sha = async (name: string) =>
      createHash("sha256")
        .update(await fs.readFile(path.join(run.main!, name)))
        .digest("hex");
    expect(att).toMatchObject({
      schema: "narwhal.attestation/v1",
      engine: "engine-1",
      launch_token: handle.launch_token,
      process: { kind: "native", pid: handle.pid, boot_id: handle.boot_id, start_ticks: handle.start_ticks },
      plan_sha256: await sha("launch.json"),
      checked_sha256: await sha("checked.json"),
      model: { config_sha256: (await readJson(path.join(run.main!, "launch.json"))).model.config_sha256 },
      cache_layout: { sha256: await sha("cache-layout.json"), num_gpu_blocks: layout.num_gpu_blocks },
      nixl_compat_hash: (await readJson(path.join(run.main!, "nixl-compat.json"))).hash,
      handshake_policy: { sha256: await sha("handshake-policy.json") },
    });
    const twiceAttested = await f.engine(["native-capture", "--run", run.main!]);
    expect(twiceAttested.code).toBe(1);
    expect(twiceAttested.stderr).toMatch(/attestation.json already exists/);

    // attestation-serve: GET on the URL's path returns the file's bytes; other paths 404, other methods 405; SIGTERM ends it with 0.
    const serve = startCli(["engine", "attestation-serve", "--run", run.main!, "--state", f.stateDir]);
    const served = await waitFor("the attestation served", () =>
      httpRequest(att.attestation_url, { timeoutMs: 1000 }).catch(() => undefined),
    );
    expect(served.status).toBe(200);
    expect(served.body.toString()).toBe(await fs.readFile(attFile, "utf8"));
    const u = new URL(att.attestation_url);
    expect((await httpRequest(`${u.origin}/elsewhere`, { timeoutMs: 1000 })).status).toBe(404);
    expect((await httpRequest(att.attestation_url, { body: {}, timeoutMs: 1000 })).status).toBe(405);
    const exited = new Promise<number | null>((resolve) => serve.once("close", resolve));
    serve.kill("SIGTERM");
    expect(await exited).toBe(0);
    await expect(httpRequest(att.attestation_url, { timeoutMs: 1000 })).rejects.toThrow();

    const stopped = ok(await f.engine(["stop-native", "--run", run.main!]));
    expect(stopped.details).toMatchObject({
      pid: handle.pid,
      boot_id: handle.boot_id,
      start_ticks: handle.start_ticks,
    });
    expect(await readJson(path.join(run.main!, "native-stop.json"))).toMatchObject({
      schema: "narwhal.native-stop/v1",
      pgid: handle.pid,
    });
    expect((await engineProcesses(f.stateDir)).map((p) => p.pid)).not.toContain(handle.pid);
    const twice = await f.engine(["stop-native", "--run", run.main!]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(/native-stop.json already exists/);
    // An attestation binds a running engine only: set the written one aside, and native-capture refuses the stopped engine.
    await fs.rename(attFile, `${attFile}.kept`);
    const gone = await f.engine(["native-capture", "--run", run.main!]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(
      new RegExp(`engine-1 is not running as recorded.*process ${handle.pid} .*is not running`),
    );
    await expect(fs.access(attFile)).rejects.toThrow();
    await fs.rename(`${attFile}.kept`, attFile);
    // A whole lifecycle's evidence, the key's environment beside it, written as seed 000's `umask 077` shell writes it.
    expect(await assertPrivateTree(run.main!)).toBeGreaterThanOrEqual(12);
  });

  it("start-shared starts two plans on one GPU within the allowance and records the readings", async () => {
    const r = ok(await f.engine(["start-shared", "--backend", "native", "--run", run.s1!, "--run", run.s2!]));
    expect(r.details.budget).toMatchObject({ gpu_uuid: SHARED_GPU, device_allowance: "0.3", sum: "0.3" });
    const [a, b] = [
      await readJson(path.join(run.s1!, "shared-start.json")),
      await readJson(path.join(run.s2!, "shared-start.json")),
    ];
    // floor(0.1 x 81559) = 8155 MiB, floor(0.2 x 81559) = 16311 MiB; allowance 0.3 x 81559 = 24467.7 MiB.
    expect(a).toMatchObject({
      status: "ready",
      launch_order: 1,
      gpu: { uuid: SHARED_GPU, selected: "0", total_mib: 81559 },
      increase_mib: { engine: 8155, aggregate: 8155 },
      allowance: { allowance_mib: "24467.7", engine_share_mib: "8155.9" },
    });
    expect(b).toMatchObject({
      status: "ready",
      launch_order: 2,
      increase_mib: { engine: 16311, aggregate: 24466 },
      readings: { baseline: { used_mib: 0 }, before: { used_mib: 8155 }, after: { used_mib: 24466 } },
    });
    expect(b.identity).toMatchObject({
      vllm_version: "0.11.0",
      model_revision: "sim-0001",
      process: { boot_id: expect.any(String), start_ticks: expect.any(Number) },
    });
    for (const dir of [run.s1!, run.s2!]) ok(await f.engine(["stop-native", "--run", dir]));
  });

  it("start-shared refuses nine --run's and an allowance exceeded by 0.01, before launching anything", async () => {
    const nine = await f.engine([
      "start-shared",
      "--backend",
      "native",
      ...Array.from({ length: 9 }, () => ["--run", run.o1!]).flat(),
    ]);
    expect(nine.code).toBe(1);
    expect(nine.stderr).toMatch(/--run is given 9 time\(s\); start-shared takes 2 to 8/);
    const over = await f.engine(["start-shared", "--backend", "native", "--run", run.o1!, "--run", run.o2!]);
    expect(over.code).toBe(1);
    expect(over.stderr).toMatch(/0\.1 \+ 0\.21 = 0\.31 exceeds shared_device\.device_allowance 0\.3/);
    expect(await fs.readdir(run.o1!)).not.toContain("native-process.json");

    // The startup environment's attestation URL takes precedence over the prepared one, and is bound too.
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    try {
      const port = (busy.address() as net.AddressInfo).port;
      const taken = await f.engine(["start-shared", "--backend", "native", "--run", run.l1!, "--run", run.l2!], {
        NARWHAL_NODE_1_ATTESTATION_URL: `http://127.0.0.1:${port}/v1/attestation`,
      });
      expect(taken.code).toBe(1);
      expect(taken.stderr).toMatch(
        new RegExp(
          `engine-1 attestation port ${port} on 127.0.0.1 \\(NARWHAL_NODE_1_ATTESTATION_URL\\) already has a listener`,
        ),
      );
    } finally {
      busy.close();
    }
    const zero = await f.engine([
      "start-shared",
      "--backend",
      "native",
      "--ready-seconds",
      "0",
      "--run",
      run.l1!,
      "--run",
      run.l2!,
    ]);
    expect(zero.code).toBe(1);
    expect(zero.stderr).toMatch(/--ready-seconds.*positive integer/);
    expect(await fs.readdir(run.l1!)).not.toContain("native-process.json");
  });

  it("a failed shared start stops what it started in reverse order and marks each record failed", async () => {
    const r = await f.engine(["start-shared", "--backend", "native", "--run", run.f1!, "--run", run.f2!]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/shared startup failed at engine-2/);
    const [a, b] = [
      await readJson(path.join(run.f1!, "shared-start.json")),
      await readJson(path.join(run.f2!, "shared-start.json")),
    ];
    expect(b).toMatchObject({
      status: "failed",
      cleanup_status: "exited",
      cause: expect.stringMatching(/out of memory|exited during startup/i),
      post_cleanup: { used_mib: 0 },
    });
    expect(a).toMatchObject({
      status: "failed",
      cleanup_status: "stopped",
      cause: expect.stringMatching(/failed at engine-2/),
    });
    expect(await readJson(path.join(run.f1!, "native-stop.json"))).toMatchObject({ engine: "engine-1" });
    expect(await engineProcesses(f.stateDir)).toEqual([]);
  });

  it("a measured increase above allowance x total memory fails the start and cleans up", async () => {
    const r = await f.engine(["start-shared", "--backend", "native", "--run", run.g1!, "--run", run.g2!]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /memory use rose by 24468 MiB since the baseline, above the allowance 0\.3 × 81559 MiB = 24467\.7 MiB/,
    );
    const [a, b] = [
      await readJson(path.join(run.g1!, "shared-start.json")),
      await readJson(path.join(run.g2!, "shared-start.json")),
    ];
    expect(b).toMatchObject({
      status: "failed",
      cleanup_status: "terminated",
      increase_mib: { engine: 16313, aggregate: 24468 },
    });
    expect(a).toMatchObject({
      status: "failed",
      cleanup_status: "stopped",
      native_stop: path.join(run.g1!, "native-stop.json"),
    });
    expect(await engineProcesses(f.stateDir)).toEqual([]);
  });
});
