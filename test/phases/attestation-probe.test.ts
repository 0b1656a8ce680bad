// The probe of an attestation sidecar, against the real sidecar (attestation_serve.py over real HTTP):
// what it serves must speak for the engine that runs now; another engine's or a stale
// attestation is an error naming both, and the sidecar answers only GET on its URL's path.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { spawn, type ChildProcess } from "node:child_process";
import { probeSidecar, sidecarScript, type Sidecar } from "../../src/phases/attestation-sidecar.js";
import { ATTESTATION_SCHEMA, type Attestation } from "../../src/phases/attestation.js";
import type { EngineHandle, PreparedRun } from "../../src/phases/types.js";
import { httpRequest } from "../../src/phases/http.js";

const PLAN = "a".repeat(64);

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function attestationOf(engine: string, url: string, pid: number, plan = PLAN): Attestation {
  return {
    schema: ATTESTATION_SCHEMA,
    engine,
    node: "local",
    attested_at: new Date().toISOString(),
    attestation_url: url,
    launch_token: `token-${engine}`,
    // No start tick to watch: the sidecar serves until stopped.
    process: { kind: "native", pid, boot_id: "boot-1", start_ticks: 777 },
    plan_sha256: plan,
    checked_sha256: "c".repeat(64),
    model: { config_sha256: "d".repeat(64), file_sha256: null, tree_sha256: null },
    cache_layout: {
      block_size: 16,
      num_gpu_blocks: 100,
      gpu_kv_cache_tokens: 1600,
      cache_dtype: "auto",
      tensor_parallel_size: 1,
      sha256: "e".repeat(64),
    },
    nixl_compat_hash: null,
    handshake_policy: null,
  };
}

const run = (engine: string): PreparedRun => ({
  engine,
  dir: "/nonexistent",
  input_hash: "h",
  plan_sha256: PLAN,
  launch_token: `token-${engine}`,
});
const handle = (pid: number): EngineHandle => ({
  kind: "native",
  pid,
  pgid: pid,
  boot_id: "boot-1",
  start_ticks: 777,
  launch_token: "token-engine-1",
});

describe("probing an attestation sidecar", () => {
  let dir = "";
  let url = "";
  let child: ChildProcess;
  const sidecar: Sidecar = {
    engine: "engine-2",
    launch_token: "token-engine-2",
    node: "local",
    pid: 0,
    boot_id: "b",
    start_ticks: 0,
  };

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-attest-"));
    url = `http://127.0.0.1:${await freePort()}/v1/attestation`;
    // The sidecar at engine-1's URL serves engine-2's attestation (pid 4242 standing for a process that is gone).
    const file = path.join(dir, "attestation.json");
    const att = attestationOf("engine-2", url, 4242);
    delete (att.process as { start_ticks?: number }).start_ticks;
    await fs.writeFile(file, JSON.stringify(att));
    child = spawn("python3", [sidecarScript(), file], { stdio: "ignore" });
    for (let i = 0; i < 100; i++) {
      const r = await httpRequest(url, { timeoutMs: 500 }).catch(() => null);
      if (r?.status === 200) return;
      await new Promise((res) => setTimeout(res, 100));
    }
    throw new Error(`the sidecar never answered at ${url}`);
  });
  afterAll(async () => {
    child.kill("SIGTERM");
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("refuses another engine's attestation, naming both engines and both processes", async () => {
    const err = await probeSidecar(run("engine-1"), handle(4242), sidecar, url, AbortSignal.timeout(5000)).catch(
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(
      /the attestation served at http:\/\/127\.0\.0\.1:\d+\/v1\/attestation does not speak for engine-1.*it attests engine-2, not engine-1/,
    );
    expect(err).toMatchObject({ engine: "engine-1", step: "capture", input: "attestation_url" });
  });

  it("refuses a stale attestation: the engine runs as another process", async () => {
    const stale = await probeSidecar(run("engine-2"), handle(5151), sidecar, url, AbortSignal.timeout(5000)).catch(
      (e: unknown) => e as Error,
    );
    expect((stale as Error).message).toMatch(/bound to pid 4242 .* the engine runs as pid 5151/);
  });

  it("answers only GET (and HEAD) on its URL's path", async () => {
    const u = new URL(url);
    expect((await httpRequest(`${u.origin}/other`, { timeoutMs: 2000 })).status).toBe(404);
    expect((await httpRequest(url, { body: {}, timeoutMs: 2000 })).status).toBe(405);
  });
});
