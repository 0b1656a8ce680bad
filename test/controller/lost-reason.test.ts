// A lost engine's failure quotes its log's last lines. Every observation of a lost engine asks for
// them (each plan, status and pass), so only the log's end is read: at the log cap (16 MiB) a plan of
// 1000 lost native engines read 16 GB to quote 3000 lines.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NativeBackend } from "../../src/backends/native.js";
import { ENGINE_LOG } from "../../src/backends/engine-log.js";
import { NodeHosts } from "../../src/hosts/node-hosts.js";
import { World } from "../../src/controller/world.js";
import type { EngineBackend } from "../../src/backends/types.js";
import type { EngineContext } from "../../machines/engine-context.js";
import type { EngineHandle, PreparedRun } from "../../src/phases/types.js";
import { memoryLogger } from "../log/memory-logger.js";
import { unlessGone } from "../../src/controller/engine-gone.js";
import { EngineLost, PhaseError, toErrorRecord } from "../../src/errors.js";

const CAP = 16 * 1024 * 1024;
const line = (i: number) => `INFO step ${i} ${"x".repeat(60)}\n`;

describe("a lost native engine's last log lines", () => {
  let dir: string;
  let run: PreparedRun;
  let backend: NativeBackend;
  const handle: EngineHandle = { kind: "native", pid: 1, pgid: 1, start_ticks: 1, launch_token: "t", boot_id: "b" };

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "nw-lost-reason-"));
    run = { engine: "engine-1", dir, input_hash: "i", plan_sha256: "p", launch_token: "t" };
    // ~2.6 MiB of log, then why it died: far more than the tail, far less than the cap.
    const body = Array.from({ length: 40_000 }, (_, i) => line(i)).join("");
    await fs.writeFile(path.join(dir, ENGINE_LOG), body + "ERROR CUDA out of memory\nengine exited\n");
    backend = new NativeBackend({
      stateDir: dir,
      hostEnv: {},
      logCapBytes: CAP,
      hosts: new NodeHosts({ stateDir: dir, clientEnv: {} }),
    });
  });
  afterAll(() => fs.rm(dir, { recursive: true, force: true }));

  it("reads no more than the tail asked for, and still ends with the last lines", async () => {
    const tail = await backend.startupLog(run, handle, { tailBytes: 16 * 1024 });
    expect(tail.problem).toBeUndefined();
    expect(tail.text.length).toBeLessThanOrEqual(16 * 1024);
    // Whole lines only: the cut one before them is dropped.
    expect(tail.text).toMatch(/^INFO step \d+ x{60}\n/);
    expect(tail.text.endsWith("ERROR CUDA out of memory\nengine exited\n")).toBe(true);
    // Without a tail the log is evidence: read whole up to the cap.
    const whole = await backend.startupLog(run, handle);
    expect(whole.text.length).toBeGreaterThan(2 * 1024 * 1024);
    expect(whole.text.startsWith(line(0))).toBe(true);
  });

  it("names the cause in the lost engine's reason", async () => {
    const world = new World(
      { native: backend } as unknown as Record<"native" | "container", EngineBackend>,
      memoryLogger().log,
      1000,
    );
    const ctx = { handle, run } as EngineContext;
    expect(await world.lostReason(ctx, [])).toBe(
      `exited; last log lines: ${line(39_999).trim()} | ERROR CUDA out of memory | engine exited`,
    );
  });

  // A probe or capture failing against an engine that is gone (engine-gone.ts): pid 1 is not this handle's
  // process (its start tick differs), so the backend finds the engine not running, as after a death.
  it("turns a step's retryable failure against a gone engine into its loss, quoting the step and the log", async () => {
    const gone = { engine: "engine-1", step: "probe" as const, backend, run, handle, secrets: [] };
    const refused = new PhaseError("engine-1", "probe", "GET /health failed: connect ECONNREFUSED", {
      retryable: true,
    });
    const lost = await unlessGone({ ...gone, signal: new AbortController().signal }, () =>
      Promise.reject(refused),
    ).catch((err: unknown) => err);
    expect(lost).toBeInstanceOf(EngineLost);
    expect(toErrorRecord(lost)).toMatchObject({ name: "EngineLost", step: "probe", retryable: true });
    expect((lost as Error).message).toBe(
      `the engine is no longer running: exited during its probe (GET /health failed: connect ECONNREFUSED); last log lines: ${line(39_999).trim()} | ERROR CUDA out of memory | engine exited`,
    );
    // What the engine answered stands, and so does a step that was cancelled.
    const wrong = new PhaseError("engine-1", "probe", "/version returned 0.10.2", { retryable: false });
    await expect(
      unlessGone({ ...gone, signal: new AbortController().signal }, () => Promise.reject(wrong)),
    ).rejects.toBe(wrong);
    const aborted = new AbortController();
    aborted.abort();
    await expect(unlessGone({ ...gone, signal: aborted.signal }, () => Promise.reject(refused))).rejects.toBe(refused);
    expect(await unlessGone({ ...gone, signal: new AbortController().signal }, () => Promise.resolve(7))).toBe(7);
  });
});
