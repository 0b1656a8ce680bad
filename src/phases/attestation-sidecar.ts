// The attestation sidecar beside an engine (seed 003 §14): attestation_serve.py
// with the node's python3, started on the engine's node through its HostAccess as
// an owned process, like a native engine: found again by the environment it
// carries (state directory, node, the engine's launch token: never two per
// engine), recorded with its boot id and start tick, stopped with its engine, and
// exiting by itself when the engine it attests is gone. Its marker is
// NARWHAL_ATTESTATION_TOKEN, never NARWHAL_LAUNCH_TOKEN, so no engine listing takes it for an engine.
import path from "node:path";
import type { HostAccess } from "../hosts/types.js";
import { NODES_LISTED_AT_ONCE, type NodeHosts } from "../hosts/node-hosts.js";
import { mapBounded } from "../hosts/slots.js";
import type { EngineHandle, PreparedRun } from "./types.js";
import type { LaunchPlan } from "./plan.js";
import { runOnNode, stageRun, type RunOnNode } from "../backends/native-node-files.js";
import { isSameProcessOn, procStatOn, signalGroupOn } from "../backends/native-host.js";
import { writeFileAtomic } from "../state/atomic-file.js";
import { noFailpoints, type Failpoint } from "../failpoints.js";
import { PhaseError } from "../errors.js";
import { httpRequest } from "./http.js";
import { checkScriptPath } from "../app.js";
import {
  ATTESTATION_FILE,
  attestationProblems,
  ensureAttestation,
  expectationOf,
  type Attestation,
} from "./attestation.js";
import { readVerifiedPlan } from "./plan-binding.js";
import type { EngineBackend } from "../backends/types.js";
import { spawnHelper } from "../hosts/stdlib-python.js";

/** Beside check_runtime.py (src/phases, also for a built dist/): shipped to the node as it is. */
export const sidecarScript = () => path.join(path.dirname(checkScriptPath()), "attestation_serve.py");
export const SIDECAR_FILE = "attestation-sidecar.json";
export const SIDECAR_LOG = "attestation.log";
const TOKEN_VAR = "NARWHAL_ATTESTATION_TOKEN";
const ENGINE_VAR = "NARWHAL_ATTESTATION_ENGINE";
const READY_MS = 15_000;

/** A running sidecar: the engine it serves and its process identity on its node. */
export interface Sidecar {
  engine: string;
  launch_token: string;
  node: string;
  pid: number;
  boot_id: string;
  start_ticks: number;
}

export interface SidecarDeps {
  hosts: NodeHosts;
  stateDir: string;
  failpoint?: Failpoint;
}

/** The sidecars this state directory runs on one node (only the one for `token` when given). */
export async function findSidecarsOn(host: HostAccess, stateDir: string, token?: string): Promise<Sidecar[]> {
  const { bootId, leaders, envs } = await host.scanLeaders([
    TOKEN_VAR,
    ENGINE_VAR,
    "NARWHAL_STATE_DIR",
    "NARWHAL_NODE",
  ]);
  const found: Sidecar[] = [];
  for (const p of leaders) {
    const env = envs.get(p.pid);
    const t = env?.[TOKEN_VAR];
    if (!env || !t || env.NARWHAL_STATE_DIR !== stateDir || env.NARWHAL_NODE !== host.node) continue;
    if (token !== undefined && t !== token) continue;
    found.push({
      engine: env[ENGINE_VAR] ?? "?",
      launch_token: t,
      node: host.node,
      pid: p.pid,
      boot_id: bootId,
      start_ticks: p.startTicks,
    });
  }
  return found;
}

/** Stop one sidecar (SIGTERM, then SIGKILL): only while it is still the recorded process. */
async function stopOne(host: HostAccess, s: Sidecar): Promise<void> {
  if (!(await isSameProcessOn(host, s.pid, s.start_ticks))) return;
  await signalGroupOn(host, s.pid, "TERM");
  for (let i = 0; i < 50; i++) {
    if (!(await isSameProcessOn(host, s.pid, s.start_ticks))) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  await signalGroupOn(host, s.pid, "KILL");
}

/** The hosts a sidecar may run on: every node learned, and the controller's machine. */
function scanned(hosts: NodeHosts, node?: string): HostAccess[] {
  if (node !== undefined && hosts.spec(node)) return [hosts.access(node)];
  const all = hosts.all().map((k) => k.access);
  return all.some((h) => h.kind === "local") ? all : [...all, hosts.local()];
}

/**
 * Stop the sidecars serving the engine `token` names: on `node`, or where it is not known (a container
 * handle names no node) on every node, the nodes at once.
 */
export async function stopSidecars(deps: SidecarDeps, which: { token: string; node?: string }): Promise<Sidecar[]> {
  const perNode = await mapBounded(scanned(deps.hosts, which.node), NODES_LISTED_AT_ONCE, async (host) => {
    const found = await findSidecarsOn(host, deps.stateDir, which.token);
    for (const s of found) await stopOne(host, s);
    return found;
  });
  return perNode.flat();
}

/** The node a handle's engine runs on, if it says (container handles name none: the plan's node). */
export const handleNode = (handle: EngineHandle): string | undefined =>
  handle.kind === "native" ? handle.node : undefined;

/**
 * The sidecar for this run's engine, running and answering at `url`: the one found on the node by
 * the engine's launch token, else one started now. Its identity is recorded in attestation-sidecar.json.
 */
export async function ensureSidecar(
  deps: SidecarDeps,
  run: PreparedRun,
  plan: Pick<LaunchPlan, "node" | "launch_token">,
  url: string,
  signal: AbortSignal,
): Promise<Sidecar> {
  const failpoint = deps.failpoint ?? noFailpoints;
  const where = runOnNode(deps.hosts, plan.node.name, run);
  // Never two per engine. A sidecar of this engine under another launch token serves an instance
  // that no longer runs (a retiring engine that died during its replacement, whose own exit check
  // has not fired yet): left running, it holds the port and answers with a stale attestation.
  const mine = (await findSidecarsOn(where.host, deps.stateDir)).filter((s) => s.engine === run.engine);
  const [running, ...extra] = mine.filter((s) => s.launch_token === plan.launch_token);
  for (const s of [...extra, ...mine.filter((s) => s.launch_token !== plan.launch_token)]) await stopOne(where.host, s);
  let sidecar = running;
  if (!sidecar) {
    signal.throwIfAborted();
    const [script, attestation] = await stageRun(where, run, "capture", [
      sidecarScript(),
      path.join(run.dir, ATTESTATION_FILE),
    ]);
    const env = {
      NARWHAL_STATE_DIR: deps.stateDir,
      NARWHAL_NODE: where.host.node,
      [TOKEN_VAR]: plan.launch_token,
      [ENGINE_VAR]: run.engine,
    };
    failpoint("attest:spawn:before");
    const { pid } = await spawnHelper(where.host, [script!, attestation!], {
      env,
      cwd: where.dir,
      logFile: path.posix.join(where.dir, SIDECAR_LOG),
    });
    failpoint("attest:spawn:after");
    const stat = await procStatOn(where.host, pid);
    sidecar = {
      engine: run.engine,
      launch_token: plan.launch_token,
      node: where.host.node,
      pid,
      boot_id: await where.host.bootId(),
      start_ticks: stat?.startTicks ?? -1,
    };
  }
  await writeFileAtomic(path.join(run.dir, SIDECAR_FILE), JSON.stringify(sidecar, null, 2) + "\n");
  await waitServing(where, run, sidecar, url, signal);
  return sidecar;
}

/** Wait until the sidecar answers at its URL; its exit (a port taken, python3 missing) fails with its log. */
async function waitServing(where: RunOnNode, run: PreparedRun, s: Sidecar, url: string, signal: AbortSignal) {
  const { host } = where;
  const deadline = Date.now() + READY_MS;
  for (;;) {
    const answered = await httpRequest(url, { timeoutMs: 2000, signal }).then(
      (r) => r.status,
      () => null,
    );
    if (answered === 200) return;
    signal.throwIfAborted();
    const alive = await isSameProcessOn(host, s.pid, s.start_ticks);
    if (!alive || Date.now() > deadline) {
      if (alive) await stopOne(host, s);
      const log = await host
        .readFile(path.posix.join(where.dir, SIDECAR_LOG), { maxBytes: 64 * 1024 })
        .then((b) => b.toString("utf8").trim().split("\n").slice(-3).join(" | "))
        .catch(() => "");
      throw new PhaseError(
        run.engine,
        "capture",
        `the attestation sidecar (pid ${s.pid} on node ${s.node}) ${alive ? `did not answer at ${url} within ${READY_MS} ms` : "exited"}${log ? `: ${log}` : ""}`,
        {
          retryable: true,
          input: "attestation_url",
          fix: "Free the attestation port on the node (ss -ltnp) and make python3 available there; narwhal starts the sidecar again.",
        },
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** What the probe of a sidecar found: the URL answered with this engine's current attestation. */
export interface SidecarProof {
  url: string;
  sidecar_pid: number;
  node: string;
  checked_at: string;
}

/**
 * GET the attestation URL and check it speaks for this engine's running instance (engine, plan,
 * process). A sidecar serving another engine's or a stale attestation is an error naming both.
 */
export async function probeSidecar(
  run: PreparedRun,
  handle: EngineHandle,
  sidecar: Sidecar,
  url: string,
  signal: AbortSignal,
): Promise<SidecarProof> {
  const fail = (message: string) =>
    new PhaseError(run.engine, "capture", message, {
      retryable: true,
      input: "attestation_url",
      fix: "Stop whatever serves that URL (ss -ltnp on the node) so each engine's own sidecar serves it; narwhal restarts the sidecar.",
    });
  const res = await httpRequest(url, { timeoutMs: 5000, signal }).catch((err: unknown) => {
    throw fail(`GET ${url} failed: ${(err as Error).message}`);
  });
  let served: Partial<Attestation>;
  try {
    served = JSON.parse(res.body.toString("utf8")) as Partial<Attestation>;
  } catch {
    throw fail(`GET ${url} answered ${res.status} with no attestation JSON`);
  }
  const want = expectationOf(run, handle);
  const problems = res.status === 200 ? attestationProblems(served, want) : [`GET answered ${res.status}`];
  if (problems.length)
    throw fail(
      `the attestation served at ${url} does not speak for ${run.engine} (plan ${run.plan_sha256.slice(0, 12)}): ${problems.join("; ")}`,
    );
  return { url, sidecar_pid: sidecar.pid, node: sidecar.node, checked_at: new Date().toISOString() };
}

/**
 * The capture step's attestation: attestation.json for the running engine (ensureAttestation),
 * its sidecar on the engine's node (ensureSidecar), and the probe of what it serves. Each part is an
 * ensure, so a crash at any line is resumed by running it again. null when the plan has no URL.
 */
export async function attestAndServe(
  deps: SidecarDeps,
  run: PreparedRun,
  engine: { backend: EngineBackend; handle: EngineHandle },
  signal: AbortSignal,
): Promise<SidecarProof | null> {
  const { plan } = await readVerifiedPlan(run, "capture");
  if (!plan.attestation_url) return null;
  const url = plan.attestation_url;
  await ensureAttestation(run, { ...engine, host: deps.hosts.access(plan.node.name), url });
  const sidecar = await ensureSidecar(deps, run, plan, url, signal);
  return probeSidecar(run, engine.handle, sidecar, url, signal);
}

/** Stop an engine, then its sidecar (which would exit by itself within WATCH_SECONDS: this makes it now). */
export async function stopEngineAndSidecar(
  backend: EngineBackend,
  handle: EngineHandle,
  graceMs: number,
  deps: SidecarDeps | undefined,
): Promise<void> {
  await backend.stop(handle, graceMs);
  if (deps) await stopSidecars(deps, { token: handle.launch_token, node: handleNode(handle) });
}
