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
import { kvOf, runCli, sidecarProcesses, status, type CliResult } from "./cli.js";
import { envFileFor, readRunEnv } from "../../src/phases/run-env.js";
import type { StatusView } from "../../src/cli/status-view.js";

export interface KillPoint {
  name: string;
  hit: number;
}

export const killSpec = (p: KillPoint) => `${p.name}@${p.hit}`;

export function reconcileOnce(
  fleet: Pick<SimFleet, "dir" | "stateDir">,
  env: Record<string, string> = {},
): Promise<CliResult> {
  return runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir], env);
}

/** Run until the kill point fires; fails the test if it never did (a campaign that kills nothing proves nothing). */
export async function killAt(
  fleet: Pick<SimFleet, "dir" | "stateDir">,
  point: KillPoint,
  env: Record<string, string> = {},
): Promise<void> {
  const r = await reconcileOnce(fleet, { ...env, NARWHAL_FAILPOINTS: killSpec(point) });
  expect(r.code, `kill point ${killSpec(point)} was never reached:\n${r.stderr.slice(-2000)}`).toBeNull();
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/**
 * Every directory under `dir` is 0700 and no file has group or other bits (seed 000 writes
 * run directories under `umask 077`: the engine's key and environment sit beside the evidence).
 * Returns how many files were checked, so a caller can tell an empty tree from a private one.
 */
export async function assertPrivateTree(dir: string): Promise<number> {
  expect((await fs.stat(dir)).mode & 0o777, dir).toBe(0o700);
  let files = 0;
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) files += await assertPrivateTree(p);
    else {
      expect(((await fs.lstat(p)).mode & 0o077).toString(8), `${p} is readable by group or others`).toBe("0");
      files++;
    }
  }
  return files;
}

/** Every complete run directory: a parseable plan; checked.json (with its nixl-compat.json) and cache-layout.json, if present, bound to it; private. */
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
      expect((await fs.stat(path.join(dir, envFileFor(plan.backend)))).mode & 0o777).toBe(0o600);
      const checked = await fs.readFile(path.join(dir, "checked.json"), "utf8").catch(() => null);
      if (checked !== null) expect(JSON.parse(checked).plan_sha256).toBe(sha256(planBytes));
      // check writes nixl-compat.json before checked.json: a checked run always has its NIXL compatibility record.
      if (checked !== null) {
        const compat = JSON.parse(await fs.readFile(path.join(dir, "nixl-compat.json"), "utf8"));
        expect(compat).toMatchObject({ plan_sha256: sha256(planBytes), unknown: [] });
        expect(compat.hash).toMatch(/^[0-9a-f]{64}$/);
      }
      // Every transfer proof's evidence is whole, whatever it found (a killed proof's file stays beside the rerun's).
      for (const f of (await fs.readdir(dir)).filter((x) => /^kv-transfer(\.\d+)?\.json$/.test(x))) {
        const proof = JSON.parse(await fs.readFile(path.join(dir, f), "utf8"));
        expect(proof.schema, `${dir}/${f}`).toBe("narwhal.kv-transfer/v1");
        expect([proof.prefill.engine, proof.decode.engine]).toContain(engine);
      }
      // An attestation, whichever run it is in, binds that run's plan.
      const attestation = await fs.readFile(path.join(dir, "attestation.json"), "utf8").catch(() => null);
      if (attestation !== null) expect(JSON.parse(attestation).plan_sha256).toBe(sha256(planBytes));
      const layout = await fs.readFile(path.join(dir, "cache-layout.json"), "utf8").catch(() => null);
      if (layout !== null) expect(JSON.parse(layout).plan_sha256).toBe(sha256(planBytes));
      await assertPrivateTree(dir);
      count++;
    }
  }
  return count;
}

/**
 * The engine enforces its API key: /v1/models answers 401 without it and 200 with it. The key is
 * the one the run was prepared with (engine.env / container.env), so this holds for both backends.
 */
export async function assertKeyEnforced(runDir: string, engine: string): Promise<void> {
  const plan = JSON.parse(await fs.readFile(path.join(runDir, "launch.json"), "utf8")) as { endpoint: string };
  const key = (await readRunEnv(runDir)).env.VLLM_API_KEY;
  expect(key, `${engine}: the campaign's fleet has an API key`).toBeTruthy();
  const url = plan.endpoint.replace(/\/+$/, "") + "/v1/models";
  const get = async (headers: Record<string, string>) =>
    (await fetch(url, { headers, signal: AbortSignal.timeout(10_000) })).status;
  expect(await get({}), `${engine}: ${url} without the API key`).toBe(401);
  expect(await get({ Authorization: `Bearer ${key}` }), `${engine}: ${url} with the API key`).toBe(200);
}

/**
 * After the clean rerun: all captured, one engine per record (and no other), each enforcing its key, evidence
 * intact, and (`proofs`, default) every prefill and decode proven with KVTransfer=True and its kv-transfer*.json.
 */
export async function assertConverged(
  fleet: SimFleet,
  engines: string[],
  running: () => Promise<Array<{ engine: string; id: string }>>,
  { proofs = true }: { proofs?: boolean } = {},
): Promise<Record<string, { id: string; run_dir: string }>> {
  const view = await status(fleet.stateDir);
  const out: Record<string, { id: string; run_dir: string }> = {};
  for (const name of engines) {
    const e = view.engines.find((x) => x.engine === name);
    expect(
      e?.phase,
      `${name} after rerun: ${JSON.stringify(e?.last_error)} ${JSON.stringify(e?.history.slice(-6))}`,
    ).toBe("captured");
    const id = String(e!.pid ?? e!.container_id);
    out[name] = { id, run_dir: e!.run_dir! };
    const planBytes = await fs.readFile(path.join(e!.run_dir!, "launch.json"));
    expect(sha256(planBytes)).toBe(e!.plan_sha256);
    await assertKeyEnforced(e!.run_dir!, name);
    // A P/D pair serves only proven: the rerun proved the engines that run now, and left the evidence.
    if (proofs && (e!.role === "prefill" || e!.role === "decode")) {
      const kv = kvOf(e);
      expect(kv, `${name}: KVTransfer after rerun`).toMatchObject({ status: "True", reason: "Proven" });
      const proofs = (await fs.readdir(e!.run_dir!)).filter((f) => /^kv-transfer(\.\d+)?\.json$/.test(f));
      expect(proofs.length, `${name}: kv-transfer*.json in ${e!.run_dir}`).toBeGreaterThan(0);
    }
  }
  const live = await running();
  expect(
    live.map((p) => p.engine).sort(),
    `exactly one engine per desired record, no orphans: ${JSON.stringify(live)}`,
  ).toEqual([...engines].sort());
  for (const p of live) expect(p.id).toBe(out[p.engine]!.id);
  await assertOneSidecarEach(fleet.stateDir, engines, view);
  await assertEvidenceIntact(fleet.stateDir);
  return out;
}

/**
 * Exactly one attestation sidecar per engine (none for anything else), each the one status names, serving
 * an attestation bound to the engine that runs now (its pid and plan hash).
 */
export async function assertOneSidecarEach(
  stateDir: string,
  engines: string[],
  // The caller's status view (a status process costs 0.6 s of CPU): no controller runs in between.
  view: StatusView,
): Promise<void> {
  const sidecars = await sidecarProcesses(stateDir);
  expect(sidecars.map((s) => s.engine).sort(), `one sidecar per engine: ${JSON.stringify(sidecars)}`).toEqual(
    [...engines].sort(),
  );
  for (const s of sidecars) {
    const e = view.engines.find((x) => x.engine === s.engine)!;
    const plan = JSON.parse(await fs.readFile(path.join(e.run_dir!, "launch.json"), "utf8"));
    expect(s.launch_token, `${s.engine}'s sidecar serves its current run`).toBe(plan.launch_token);
    expect(e.layout?.attestation?.sidecar_pid, `${s.engine}: status names its probed sidecar`).toBe(s.pid);
    const served = await fetch(plan.attestation_url, { signal: AbortSignal.timeout(10_000) });
    expect(served.status).toBe(200);
    expect(await served.json()).toMatchObject({
      schema: "narwhal.attestation/v1",
      engine: s.engine,
      plan_sha256: e.plan_sha256,
      process: { pid: e.pid ?? expect.any(Number) },
    });
  }
}

export interface PlanEdit {
  engine: string;
  runDir: string;
  planFile: string;
  /** The hash the state (and checked.json, once checked) bind: the plan as prepared. */
  checkedSha: string;
  /** The hash of the edited launch.json. */
  editedSha: string;
  /** The file the edited command would create if it ever ran. */
  markerExists(): Promise<boolean>;
}

/**
 * A hostile edit of a plan: find the engine the state records in `phase` (default `checked`) and
 * wrap its launch.json command in a shell that touches a marker file before exec'ing the original
 * (and, with `rebindChecked`, rewrite checked.json to bind the edited plan).
 */
export async function editCheckedPlan(
  fleet: SimFleet,
  opts: { rebindChecked?: boolean; phase?: "prepared" | "checked" } = {},
): Promise<PlanEdit> {
  const phase = opts.phase ?? "checked";
  const view = await status(fleet.stateDir);
  const victim = view.engines.find((e) => e.phase === phase);
  expect(
    victim?.run_dir,
    `no engine is ${phase}: ${JSON.stringify(view.engines.map((e) => [e.engine, e.phase]))}`,
  ).toBeTruthy();
  const runDir = victim!.run_dir!;
  const planFile = path.join(runDir, "launch.json");
  const checkedFile = path.join(runDir, "checked.json");
  const original = await fs.readFile(planFile);
  const checkedSha = victim!.plan_sha256!;
  expect(sha256(original)).toBe(checkedSha);
  if (phase === "checked") expect(JSON.parse(await fs.readFile(checkedFile, "utf8")).plan_sha256).toBe(checkedSha);
  const marker = path.join(path.dirname(fleet.stateDir), `edited-command-ran-${victim!.engine}`);
  const plan = JSON.parse(original.toString());
  plan.command = ["/bin/sh", "-c", `touch ${marker}; exec "$@"`, "sh", ...plan.command];
  const edited = Buffer.from(JSON.stringify(plan, null, 2) + "\n");
  await fs.chmod(planFile, 0o600);
  await fs.writeFile(planFile, edited);
  // A thorough attacker re-binds checked.json to the edited plan: only the state's hash is left to tell.
  if (opts.rebindChecked) {
    await fs.writeFile(
      checkedFile,
      JSON.stringify({ ...JSON.parse(await fs.readFile(checkedFile, "utf8")), plan_sha256: sha256(edited) }, null, 2) +
        "\n",
    );
  }
  return {
    engine: victim!.engine,
    runDir,
    planFile,
    checkedSha,
    editedSha: sha256(edited),
    markerExists: () =>
      fs.access(marker).then(
        () => true,
        () => false,
      ),
  };
}
