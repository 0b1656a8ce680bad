// Issue 11's acceptance through the real CLI: a P/D pair serves only once a
// real NIXL transfer between its simulated engines is proven, each KV fault
// switch ends in KVTransfer=False naming its cause (exit 2, the pair not
// listed), and the repository's own desired/ converges with the proof.
import { afterAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { simFleet } from "./sim-fleet.js";
import { CLI, cliEnv, kvOf, runCli, sidecarProcesses, status, teardown, type CliResult } from "./cli.js";
import { readState } from "../../src/state/store.js";
import { readServingFleet } from "../../src/controller/serving-file.js";
import { REPO } from "./sim-fleet.js";

/** The CLI in a network namespace of its own (its own loopback): the default desired/'s fixed ports collide with nothing. */
function runInOwnNetwork(args: string[]): Promise<CliResult> {
  const child = spawn(
    "unshare",
    ["-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", process.execPath, CLI, ...args],
    { env: cliEnv(), stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr })));
}

const stateDirs: string[] = [];
afterAll(async () => {
  for (const dir of stateDirs) await teardown(dir);
});

describe("the default desired/ proves its prefill → decode pair", () => {
  it("converges with kv-transfer.json in both run directories, KVTransfer=True, and status shows the pair", async () => {
    const stateDir = path.join(await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-kv-default-")), "state");
    stateDirs.push(stateDir);
    const desired = path.join(REPO, "desired");
    const r = await runInOwnNetwork(["reconcile", "--once", "--desired", desired, "--state", stateDir]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const state = await readState(stateDir);
    for (const name of ["engine-1", "engine-2"]) {
      const e = state.engines[name]!;
      expect(e.phase).toBe("captured");
      expect(kvOf(e), name).toMatchObject({ status: "True", reason: "Proven" });
      const evidence = JSON.parse(await fs.readFile(path.join(e.run_dir!, "kv-transfer.json"), "utf8"));
      expect(evidence).toMatchObject({ passed: true, cause: null });
      expect(evidence.prefill.engine).toBe("engine-1");
      expect(evidence.decode.engine).toBe("engine-2");
    }
    expect(state.proofs?.["engine-1>engine-2"]).toMatchObject({ passed: true, source: "proof", failures: 0 });
    const serving = await readServingFleet(stateDir);
    expect(serving?.pairs).toEqual([{ prefill: "engine-1", decode: "engine-2" }]);
    expect(serving?.engines.map((e) => e.engine)).toEqual(["engine-1", "engine-2"]);
    const shown = await runCli(["status", "--state", stateDir, "--desired", desired]);
    expect(shown.stdout).toMatch(
      /^KV transfer \(prefill → decode\): 1 pair, proven for the engines running now \d+[smhd] ago$/m,
    );

    // One attestation sidecar beside each engine, probed by the capture step, bound to the engine that runs.
    const sidecars = await sidecarProcesses(stateDir);
    expect(sidecars.map((s) => s.engine).sort()).toEqual(["engine-1", "engine-2"]);
    for (const s of sidecars) {
      const e = state.engines[s.engine]!;
      const plan = JSON.parse(await fs.readFile(path.join(e.run_dir!, "launch.json"), "utf8"));
      expect(s.launch_token).toBe(plan.launch_token);
      expect(e.layout?.attestation).toMatchObject({ url: plan.attestation_url, sidecar_pid: s.pid, node: "local" });
      const attestation = JSON.parse(await fs.readFile(path.join(e.run_dir!, "attestation.json"), "utf8"));
      expect(attestation).toMatchObject({ engine: s.engine, attestation_url: plan.attestation_url });
      expect(attestation.process.pid).toBe(e.handle?.kind === "native" ? e.handle.pid : null);
    }
    const one = await runCli(["status", "engine-1", "--state", stateDir, "--desired", desired]);
    expect(one.stdout).toMatch(/^ {2}engine-1 → engine-2 {2}proven \d+[smhd] ago$/m); // one engine's status lists its pairs
    expect(one.stdout).toMatch(/attestation: {2}http:\/\/127\.0\.0\.1:18111\/v1\/attestation served by pid \d+/);
    // `down` stops them with their engines (not left to notice their engine is gone).
    expect((await runCli(["down", "--state", stateDir])).code).toBe(0);
    expect(await sidecarProcesses(stateDir)).toEqual([]);
  });
});

describe("a KV fault ends in KVTransfer=False naming its cause, exit 2, and the pair out of the serving fleet", () => {
  const cases: Array<{ fault: string; on: 1 | 2; reason: string; cause: string }> = [
    { fault: "kv_transfer_fail", on: 2, reason: "TransferFailed", cause: "transfer-failed" },
    { fault: "kv_handshake_refuse", on: 2, reason: "HandshakeRefused", cause: "handshake-refused" },
    { fault: "kv_corrupt_blocks", on: 1, reason: "CorruptedBlocks", cause: "corrupted-blocks" },
  ];
  for (const c of cases)
    it(`${c.fault} on engine-${c.on}: ${c.reason}, held (on_failure: hold)`, async () => {
      // Both engines carry the switch, scoped to one (a runtime environment of its own would be another group).
      const faults = `${c.fault}@engine-${c.on}`;
      const fleet = await simFleet({ engines: [{ faults }, { faults }], kvTransfer: { on_failure: "hold" } });
      stateDirs.push(fleet.stateDir);
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
      expect(r.code, r.stdout + r.stderr).toBe(2);
      expect(r.stdout).toMatch(/not converged: KV transfer not proven/);
      const engines = Object.fromEntries((await status(fleet.stateDir)).engines.map((e) => [e.engine, e]));
      for (const name of ["engine-1", "engine-2"]) {
        expect(engines[name]!.phase, name).toBe("captured");
        expect(kvOf(engines[name]), name).toMatchObject({ status: "False", reason: c.reason });
      }
      const state = await readState(fleet.stateDir);
      expect(state.proofs?.["engine-1>engine-2"]).toMatchObject({ passed: false, cause: c.cause, failures: 1 });
      const serving = await readServingFleet(fleet.stateDir);
      expect(serving?.pairs).toEqual([]);
      expect(serving?.engines).toEqual([]);
      // The evidence of the failed proof is kept in both run directories.
      for (const name of ["engine-1", "engine-2"]) {
        const evidence = JSON.parse(await fs.readFile(path.join(engines[name]!.run_dir!, "kv-transfer.json"), "utf8"));
        expect(evidence).toMatchObject({ passed: false, cause: c.cause });
      }
    });

  it("kv_stale_peer_metadata on the decode: its prefill restarted between two runs, the second exits 2 as TransferFailed (on_failure: hold)", async () => {
    const faults = "kv_stale_peer_metadata@engine-2";
    const fleet = await simFleet({ engines: [{ faults }, { faults }], kvTransfer: { on_failure: "hold" } });
    stateDirs.push(fleet.stateDir);
    const once = () => runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    const first = await once();
    expect(first.code, first.stdout + first.stderr).toBe(0);
    const before = await readState(fleet.stateDir);
    const prefill = before.engines["engine-1"]!.handle;
    expect(prefill?.kind).toBe("native");
    process.kill(-(prefill as { pid: number }).pid, "SIGKILL");
    const second = await once();
    expect(second.code, second.stdout + second.stderr).toBe(2);
    const state = await readState(fleet.stateDir);
    expect(state.engines["engine-1"]!.handle!.launch_token).not.toBe(prefill!.launch_token);
    // The decode kept its old peer's agent for the restarted prefill's address: every read fails, and is counted.
    expect(state.proofs?.["engine-1>engine-2"]).toMatchObject({ passed: false, cause: "transfer-failed", failures: 1 });
    expect(kvOf(state.engines["engine-2"])).toMatchObject({ status: "False", reason: "TransferFailed" });
    expect((await readServingFleet(fleet.stateDir))?.pairs).toEqual([]);
  });

  it("kv_silent_recompute on the decode: restarted once by policy, still recomputing, then held as SilentRecompute", async () => {
    const faults = "kv_silent_recompute@engine-2";
    const fleet = await simFleet({ engines: [{ faults }, { faults }] });
    stateDirs.push(fleet.stateDir);
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stdout + r.stderr).toBe(2);
    const state = await readState(fleet.stateDir);
    expect(state.proofs?.["engine-1>engine-2"]).toMatchObject({
      passed: false,
      cause: "silent-recompute",
      failures: 2,
    });
    const decode = state.engines["engine-2"]!;
    expect(kvOf(decode)).toMatchObject({ status: "False", reason: "SilentRecompute" });
    // One restart (max_decode_restarts 1): the decode runs from its second run directory, both hold evidence.
    const runs = (await fs.readdir(path.dirname(decode.run_dir!))).filter((d) => !d.startsWith("."));
    expect(runs.length).toBe(2);
    for (const run of runs)
      await expect(fs.stat(path.join(path.dirname(decode.run_dir!), run, "kv-transfer.json"))).resolves.toBeTruthy();
    expect((await readServingFleet(fleet.stateDir))?.pairs).toEqual([]);
  });
});
