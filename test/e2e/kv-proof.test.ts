// The KV transfer proof against real simulator engines: a P/D pair narwhal
// itself brought to captured (reconcile --once, real run directories, the
// fleet's API key), each KV fault turned on in the running engine through
// its NARWHAL_SIM_FAULTS_FILE, a prefill restart for stale peer metadata, and
// a pair split across two network namespaces (test/rig) for the localhost trap.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPO, SIM_SITE, simFleet, type SimFleet } from "./sim-fleet.js";
import { engineProcesses, runCli, status, teardown, waitFor } from "./cli.js";
import { proveKvTransfer, PROOF_PROMPT, type KvProofResult, type ProofEnd } from "../../src/phases/kv-proof.js";
import { decodeOnlyFinding, scrapeKvCounters } from "../../src/phases/kv-watch.js";
import { createRig, type Rig, type RigHost } from "../rig/rig.js";
import { checkedRunDir } from "../phases/kv-fixtures.js";

const KEY = "e2e-key-0123456789";
const PROOF = { timeoutMs: 20_000 };

/** The engine's current run as the proof's caller names it: its run dir, launch token and node (launch.json). */
async function endOf(stateDir: string, engine: string): Promise<ProofEnd> {
  const view = (await status(stateDir)).engines.find((e) => e.engine === engine);
  const runDir = view!.run_dir!;
  const plan = JSON.parse(await fs.readFile(path.join(runDir, "launch.json"), "utf8")) as {
    launch_token: string;
    node: { name: string };
  };
  return { engine, run_dir: runDir, launch_token: plan.launch_token, node: plan.node.name };
}

const causeOf = (r: KvProofResult) => ({ passed: r.passed, cause: r.cause });

describe("proveKvTransfer on a P/D pair narwhal started", () => {
  let fleet: SimFleet;
  let prefill: ProofEnd;
  let decode: ProofEnd;
  let faultsFile: string;
  /**
   * Turn the engines' runtime fault switches to exactly these (empty: none). One file both read, each switch
   * scoped to its engine: engines of one group share one runtime environment (seed 000's signature).
   */
  const faults = async (p: string, d: string) => {
    const scoped = (list: string, engine: string) =>
      list
        .split(",")
        .filter(Boolean)
        .map((f) => `${f}@${engine}`);
    await fs.writeFile(faultsFile, [...scoped(p, "engine-1"), ...scoped(d, "engine-2")].join("\n") + "\n");
  };

  beforeAll(async () => {
    // The tests drive every proof themselves: narwhal's own proofs (reconcile) would handshake first, and a
    // decode caches a good handshake per prefill engine id.
    fleet = await simFleet({ apiKey: KEY, kvTransfer: { prove: false } });
    const root = path.dirname(fleet.dir);
    faultsFile = path.join(root, "engines.faults");
    await fleet.write({
      apiKey: KEY,
      engines: [
        { environment: { NARWHAL_SIM_FAULTS_FILE: faultsFile } },
        { environment: { NARWHAL_SIM_FAULTS_FILE: faultsFile } },
      ],
    });
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    prefill = await endOf(fleet.stateDir, "engine-1");
    decode = await endOf(fleet.stateDir, "engine-2");
  });
  afterAll(async () => {
    if (fleet) await teardown(fleet.stateDir);
  });

  // First: a decode caches a good handshake per prefill engine id, so a refusal needs a fresh peer.
  it("kv_handshake_refuse on the prefill: handshake-refused, quoting the decode's log line", async () => {
    await faults("kv_handshake_refuse", "");
    const r = await proveKvTransfer(prefill, decode, PROOF);
    expect(causeOf(r)).toEqual({ passed: false, cause: "handshake-refused" });
    expect(r.message).toMatch(/engine-1.*engine-2/);
    expect(r.message).toContain("NIXL compatibility hash mismatch. Local: ");
    await faults("", "");
  });

  it("passes with kv-transfer.json in both run directories, the key nowhere in them", async () => {
    const r = await proveKvTransfer(prefill, decode, PROOF);
    expect(causeOf(r), r.message).toEqual({ passed: true, cause: null });
    expect(r.checks.map((c) => [c.name, c.passed])).toEqual([
      ["reference-request", true],
      ["prefill-request", true],
      ["side-channel-host", true],
      ["decode-request", true],
      ["no-failed-transfers", true],
      ["no-expired-requests", true],
      ["external-kv-tokens", true],
      ["bytes-transferred", true],
      ["text-matches-reference", true],
    ]);
    // Each run's next fresh name: the handshake-refused proof above wrote the first kv-transfer.json of each.
    expect(r.evidence).toEqual([
      path.join(prefill.run_dir, "kv-transfer.2.json"),
      path.join(decode.run_dir, "kv-transfer.2.json"),
    ]);
    for (const file of r.evidence) {
      const text = await fs.readFile(file, "utf8");
      expect(text).not.toContain(KEY);
      const doc = JSON.parse(text);
      expect(doc).toMatchObject({
        schema: "narwhal.kv-transfer/v1",
        passed: true,
        cause: null,
        prefill: { engine: "engine-1", run_dir: prefill.run_dir, launch_token: prefill.launch_token },
        decode: { engine: "engine-2", run_dir: decode.run_dir, launch_token: decode.launch_token },
        prompt: { text: PROOF_PROMPT },
        kv_transfer_params: { request: { do_remote_decode: true, do_remote_prefill: false } },
      });
      expect(doc.kv_transfer_params.response).toMatchObject({
        do_remote_prefill: true,
        remote_engine_id: expect.any(String),
      });
      expect(doc.counters.deltas.decode.external).toBe(doc.prompt.tokens);
      expect(doc.prompt.tokens).toBeGreaterThan(3 * doc.prompt.block_size);
      expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    }
  });

  it("the hash the decode logs at the handshake is the one nixl-compat.json records", async () => {
    const log = await fs.readFile(path.join(decode.run_dir, "engine.log"), "utf8");
    const logged = [...log.matchAll(/NIXL compatibility check passed \(hash: ([0-9a-f]{64})\)/g)].map((m) => m[1]);
    expect(logged.length).toBeGreaterThan(0);
    for (const end of [prefill, decode]) {
      const compat = JSON.parse(await fs.readFile(path.join(end.run_dir, "nixl-compat.json"), "utf8"));
      expect(compat.hash, end.engine).toBe(logged.at(-1));
    }
  });

  it.each([
    ["kv_transfer_fail", "transfer-failed"],
    ["kv_silent_recompute", "silent-recompute"],
    ["kv_corrupt_blocks", "corrupted-blocks"],
    // A decode whose /metrics lacks the prompt-source series proves nothing (kserve #5987's blind spot).
    ["missing_metric=vllm:prompt_tokens_by_source", "metrics-unreadable"],
  ] as const)("%s on the running decode: %s", async (fault, cause) => {
    await faults("", fault);
    const r = await proveKvTransfer(prefill, decode, PROOF);
    await faults("", "");
    expect(causeOf(r), r.message).toEqual({ passed: false, cause });
    expect(r.message).toMatch(/engine-1.*engine-2.*Fix: /);
    const doc = JSON.parse(await fs.readFile(r.evidence[1]!, "utf8"));
    expect(doc).toMatchObject({ passed: false, cause });
  });

  it("decodeOnlyFinding sees silent decode-only in two scrapes around router-style traffic", async () => {
    const [p, d] = await Promise.all(
      [prefill, decode].map(
        async (e) =>
          JSON.parse(await fs.readFile(path.join(e.run_dir, "launch.json"), "utf8")) as {
            endpoint: string;
            model: { served_name: string };
          },
      ),
    );
    // What a P/D router sends: the prefill with do_remote_decode, then the decode with the returned params.
    const route = async (prompt: string) => {
      const post = async (endpoint: string, body: object) => {
        const res = await fetch(`${endpoint}/v1/completions`, {
          method: "POST",
          headers: { "Content-Type": "application/json", Authorization: `Bearer ${KEY}` },
          body: JSON.stringify({ model: p!.model.served_name, prompt, temperature: 0, ...body }),
        });
        expect(res.status).toBe(200);
        return (await res.json()) as { kv_transfer_params: object };
      };
      const pre = await post(p!.endpoint, { max_tokens: 1, kv_transfer_params: { do_remote_decode: true } });
      await post(d!.endpoint, { max_tokens: 8, kv_transfer_params: pre.kv_transfer_params });
    };
    const traffic = async () => {
      for (const n of [1, 2, 3]) await route(`request ${n} of the router's traffic to the whale harbor`);
    };
    const healthy = await scrapeKvCounters(decode, PROOF);
    await traffic();
    const stillHealthy = await scrapeKvCounters(decode, PROOF);
    expect(decodeOnlyFinding("engine-2", healthy, stillHealthy)).toBeNull();
    await faults("", "kv_silent_recompute");
    await traffic();
    const silent = await scrapeKvCounters(decode, PROOF);
    await faults("", "");
    const finding = decodeOnlyFinding("engine-2", stillHealthy, silent);
    expect(finding?.cause).toBe("silent-recompute");
    expect(finding?.message).toContain("decode engine-2");
  });

  it("kv_stale_peer_metadata after the prefill restarts: transfer-failed, and a fresh decode handshake proves again", async () => {
    await faults("", "kv_stale_peer_metadata");
    // The decode now caches its prefill's handshake by address (the first proof under the switch fills it).
    expect((await proveKvTransfer(prefill, decode, PROOF)).passed).toBe(true);
    const old = (await engineProcesses(fleet.stateDir)).find((e) => e.engine === "engine-1")!;
    process.kill(-old.pid, "SIGKILL");
    await waitFor(
      "the prefill's process to be gone",
      async () => !(await engineProcesses(fleet.stateDir)).some((e) => e.pid === old.pid),
    );
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    const restarted = await endOf(fleet.stateDir, "engine-1");
    expect(restarted.launch_token).not.toBe(prefill.launch_token);
    const stale = await proveKvTransfer(restarted, decode, PROOF);
    expect(causeOf(stale), stale.message).toEqual({ passed: false, cause: "transfer-failed" });
    // The new prefill run's evidence is its first; the decode's run keeps counting.
    expect(path.basename(stale.evidence[0]!)).toBe("kv-transfer.json");
    // Without the switch the decode handshakes per engine id: the restarted prefill's new id gets a new handshake.
    await faults("", "");
    expect(causeOf(await proveKvTransfer(restarted, decode, PROOF))).toEqual({ passed: true, cause: null });
  });
});

describe("a pair split across two network namespaces (test/rig)", () => {
  let rig: Rig;
  let a: RigHost;
  let b: RigHost;
  const children: ChildProcess[] = [];
  let root: string;

  /** A simulator in HOST's namespace, its side channel advertised as SIDE_HOST; its log beside its run dir. */
  async function engine(
    host: RigHost,
    name: string,
    http: number,
    side: number,
    sideHost: string,
  ): Promise<ProofEnd & { child: ChildProcess }> {
    const endpoint = `http://${host.address}:${http}`;
    const end = await checkedRunDir(root, {
      engine: name,
      endpoint,
      servedName: "tiny-llama",
      sideChannelHost: sideHost,
      sideChannelPort: side,
      node: host.name,
    });
    const log = await fs.open(path.join(end.run_dir, "engine.log"), "w");
    const child = host.spawnIn([
      "env",
      `PYTHONPATH=${SIM_SITE}`,
      `VLLM_NIXL_SIDE_CHANNEL_HOST=${sideHost}`,
      `VLLM_NIXL_SIDE_CHANNEL_PORT=${side}`,
      "/usr/bin/python3",
      "-m",
      "vllm.entrypoints.openai.api_server",
      "--model",
      path.join(REPO, "test/sim/models/tiny-llama"),
      "--served-model-name",
      "tiny-llama",
      "--host",
      host.address,
      "--port",
      String(http),
      "--block-size",
      "16",
      "--no-enable-prefix-caching",
      "--kv-transfer-config",
      JSON.stringify({ kv_connector: "NixlConnector", kv_role: "kv_both", kv_load_failure_policy: "fail" }),
    ]);
    children.push(child);
    child.stdout!.on("data", (d: Buffer) => void log.write(d));
    child.stderr!.on("data", (d: Buffer) => void log.write(d));
    child.on("close", () => void log.close());
    await waitFor(
      `${name} on ${endpoint}`,
      async () => (await fetch(`${endpoint}/health`).catch(() => null))?.status === 200,
      20_000,
    );
    return { ...end, child };
  }

  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), "kv-proof-rig-"));
    rig = await createRig({ hosts: 2 });
    [a, b] = rig.hosts as [RigHost, RigHost];
  });
  afterAll(async () => {
    for (const c of children) c.kill("SIGKILL");
    await rig?.teardown();
    if (root) await fs.rm(root, { recursive: true, force: true });
  });

  it("a prefill advertising 127.0.0.1 to a decode on another host: side-channel-localhost; its own address: passed", async () => {
    const [trappedRun, decode] = await Promise.all([
      engine(a, "engine-1", 18601, 18611, "127.0.0.1"),
      engine(b, "engine-2", 18601, 18611, b.address),
    ]);
    const trapped = await proveKvTransfer(trappedRun, decode, PROOF);
    expect(causeOf(trapped)).toEqual({ passed: false, cause: "side-channel-localhost" });
    expect(trapped.message).toContain("127.0.0.1:18611");
    expect(trapped.message).toContain(`node ${b.name}`);
    expect(trapped.message).toContain("NARWHAL_NODE_<n>_IP");
    // The trap is real: the decode given the prefill's params dials its own loopback and fails the request.
    const post = async (endpoint: string, body: object) =>
      fetch(`${endpoint}/v1/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ model: "tiny-llama", prompt: "a b c d", max_tokens: 1, ...body }),
      });
    const pre = (await (
      await post(`http://${a.address}:18601`, { kv_transfer_params: { do_remote_decode: true } })
    ).json()) as {
      kv_transfer_params: { remote_host: string };
    };
    expect(pre.kv_transfer_params.remote_host).toBe("127.0.0.1");
    expect((await post(`http://${b.address}:18601`, { kv_transfer_params: pre.kv_transfer_params })).status).toBe(500);
    // The operator's fix: the prefill restarted (a new run) advertising its own address, same ports.
    const exited = new Promise((r) => trappedRun.child.once("close", r));
    trappedRun.child.kill("SIGTERM");
    await exited;
    const fixed = await engine(a, "engine-1", 18601, 18611, a.address);
    const proven = await proveKvTransfer(fixed, decode, PROOF);
    expect(causeOf(proven), proven.message).toEqual({ passed: true, cause: null });
    expect(proven.checks.find((c) => c.name === "side-channel-host")?.detail).toContain(`${a.address}:18611`);
    const doc = JSON.parse(await fs.readFile(proven.evidence[0]!, "utf8"));
    expect(doc.prefill).toEqual({
      engine: "engine-1",
      node: a.name,
      run_dir: fixed.run_dir,
      launch_token: fixed.launch_token,
      endpoint: `http://${a.address}:18601`,
    });
  });
});
