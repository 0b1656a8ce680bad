// The kill-point campaign: run `reconcile --once` with NARWHAL_FAILPOINTS so
// the controller SIGKILLs itself at one point, rerun it clean, and check the
// promises: every desired engine captured and enforcing its API key (401
// without it, 200 with it), exactly one engine per record, no
// orphans, and every run directory's evidence intact.
import fs from "node:fs/promises";
import path from "node:path";
import { createHash } from "node:crypto";
import { expect } from "vitest";
import type { SimFleet } from "./sim-fleet.js";
import { runCli, status, type CliResult } from "./cli.js";
import { parseEnvFile } from "../../src/phases/plan.js";

export interface KillPoint {
  name: string;
  hit: number;
}

export const killSpec = (p: KillPoint) => `${p.name}@${p.hit}`;

export function reconcileOnce(fleet: SimFleet, env: Record<string, string> = {}): Promise<CliResult> {
  return runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], env);
}

/** Run until the kill point fires; fails the test if it never did (a campaign that kills nothing proves nothing). */
export async function killAt(fleet: SimFleet, point: KillPoint, env: Record<string, string> = {}): Promise<void> {
  const r = await reconcileOnce(fleet, { ...env, NARWHAL_FAILPOINTS: killSpec(point) });
  expect(r.code, `kill point ${killSpec(point)} was never reached:\n${r.stderr.slice(-2000)}`).toBeNull();
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** Every complete run directory: a parseable plan; checked.json and cache-layout.json, if present, bound to it. */
export async function assertEvidenceIntact(stateDir: string): Promise<number> {
  const root = path.join(stateDir, "runs");
  let count = 0;
  for (const engine of await fs.readdir(root).catch(() => [] as string[])) {
    for (const name of await fs.readdir(path.join(root, engine))) {
      if (name.startsWith(".")) continue; // a half-built run a killed prepare left: never referenced, removed by the next prepare
      const dir = path.join(root, engine, name);
      const planBytes = await fs.readFile(path.join(dir, "launch.json"));
      const plan = JSON.parse(planBytes.toString());
      expect(plan.engine).toBe(engine);
      expect((await fs.stat(path.join(dir, "container.env"))).mode & 0o777).toBe(0o600);
      const checked = await fs.readFile(path.join(dir, "checked.json"), "utf8").catch(() => null);
      if (checked !== null) expect(JSON.parse(checked).plan_sha256).toBe(sha256(planBytes));
      const layout = await fs.readFile(path.join(dir, "cache-layout.json"), "utf8").catch(() => null);
      if (layout !== null) expect(JSON.parse(layout).plan_sha256).toBe(sha256(planBytes));
      count++;
    }
  }
  return count;
}

/**
 * The engine enforces its API key: /v1/models answers 401 without it and 200 with it. The key is
 * the one the run was prepared with (container.env), so this holds for both backends.
 */
export async function assertKeyEnforced(runDir: string, engine: string): Promise<void> {
  const plan = JSON.parse(await fs.readFile(path.join(runDir, "launch.json"), "utf8")) as { endpoint: string };
  const key = parseEnvFile(await fs.readFile(path.join(runDir, "container.env"), "utf8")).VLLM_API_KEY;
  expect(key, `${engine}: the campaign's fleet has an API key`).toBeTruthy();
  const url = plan.endpoint.replace(/\/+$/, "") + "/v1/models";
  const get = async (headers: Record<string, string>) => (await fetch(url, { headers, signal: AbortSignal.timeout(10_000) })).status;
  expect(await get({}), `${engine}: ${url} without the API key`).toBe(401);
  expect(await get({ Authorization: `Bearer ${key}` }), `${engine}: ${url} with the API key`).toBe(200);
}

/** After the clean rerun: all captured, one engine per record (and no other), each enforcing its key, evidence intact. */
export async function assertConverged(
  fleet: SimFleet,
  engines: string[],
  running: () => Promise<Array<{ engine: string; id: string }>>,
): Promise<Record<string, { id: string; run_dir: string }>> {
  const view = await status(fleet.stateDir);
  const out: Record<string, { id: string; run_dir: string }> = {};
  for (const name of engines) {
    const e = view.engines.find((x) => x.engine === name);
    expect(e?.phase, `${name} after rerun: ${JSON.stringify(e?.last_error)} ${JSON.stringify(e?.history.slice(-6))}`).toBe("captured");
    const id = String(e!.pid ?? e!.container_id);
    out[name] = { id, run_dir: e!.run_dir! };
    const planBytes = await fs.readFile(path.join(e!.run_dir!, "launch.json"));
    expect(sha256(planBytes)).toBe(e!.plan_sha256);
    await assertKeyEnforced(e!.run_dir!, name);
  }
  const live = await running();
  expect(live.map((p) => p.engine).sort(), `exactly one engine per desired record, no orphans: ${JSON.stringify(live)}`).toEqual([...engines].sort());
  for (const p of live) expect(p.id).toBe(out[p.engine]!.id);
  await assertEvidenceIntact(fleet.stateDir);
  return out;
}
