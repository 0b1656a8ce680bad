// The process-bound attestation (seed 001 native-capture; seed 003 §14): what an
// attestation sidecar serves for one engine. It binds the running engine's
// identity (native: pid, boot id and process start ticks as the backend recorded
// them; container: container id and its main pid) to the checked plan (launch.json's
// and checked.json's sha256), the model's hashes, the captured cache layout, the NIXL
// compatibility hash and the handshake policy. Written once per run (exclusive): a
// run directory is immutable, and a stale attestation is refused, never rewritten.
import fs from "node:fs/promises";
import path from "node:path";
import type { CacheLayout, EngineHandle, PreparedRun } from "./types.js";
import type { EngineBackend } from "../backends/types.js";
import type { HostAccess } from "../hosts/types.js";
import { readVerifiedPlan, CHECKED_FILE } from "./plan-binding.js";
import { LAYOUT_FILE } from "./capture.js";
import { NIXL_COMPAT_FILE, type NixlCompatRecord } from "./nixl-compat.js";
import { HANDSHAKE_POLICY_FILE } from "./runtime-inspect.js";
import { sha256 } from "./prepare.js";
import { procStatOn } from "../backends/native-host.js";
import { readJsonIfExists, writeFileExclusive } from "../state/atomic-file.js";
import { PhaseError } from "../errors.js";

export const ATTESTATION_FILE = "attestation.json";
export const ATTESTATION_SCHEMA = "narwhal.attestation/v1";

/** The engine process an attestation is bound to. */
export type AttestedProcess =
  | { kind: "native"; pid: number; boot_id: string; start_ticks: number }
  | { kind: "container"; container_id: string; pid: number | null; boot_id?: string; start_ticks?: number };

export interface Attestation {
  schema: typeof ATTESTATION_SCHEMA;
  engine: string;
  node: string;
  attested_at: string;
  attestation_url: string;
  launch_token: string;
  process: AttestedProcess;
  plan_sha256: string;
  checked_sha256: string;
  model: { config_sha256: string; file_sha256: string | null; tree_sha256: string | null };
  cache_layout: Pick<
    CacheLayout,
    "block_size" | "num_gpu_blocks" | "gpu_kv_cache_tokens" | "cache_dtype" | "tensor_parallel_size"
  > & { sha256: string };
  nixl_compat_hash: string | null;
  /** handshake-policy.json's compatibility hash and digest; null when the run holds none (the reconciler's runs). */
  handshake_policy: { compatibility_hash: string | null; sha256: string } | null;
}

export interface AttestOptions {
  backend: EngineBackend;
  handle: EngineHandle;
  /** The engine's node: container engines' start ticks are read there. */
  host: HostAccess;
  /** The attestation URL to serve at (the startup environment's, else the prepared one). */
  url: string;
}

/** The recorded identity of the engine, as the sidecar and a reader compare it. */
async function attestedProcess(opts: AttestOptions): Promise<AttestedProcess> {
  const h = opts.handle;
  if (h.kind === "native") return { kind: "native", pid: h.pid, boot_id: h.boot_id, start_ticks: h.start_ticks };
  const { pid } = await opts.backend.describeProcess(h);
  const stat = pid === null ? null : await procStatOn(opts.host, pid);
  return {
    kind: "container",
    container_id: h.container_id,
    pid,
    ...(stat ? { boot_id: await opts.host.bootId(), start_ticks: stat.startTicks } : {}),
  };
}

const fileSha = (file: string) =>
  fs.readFile(file).then(
    (b) => sha256(b),
    () => null,
  );

/** model_tree_sha256 when the plan records one (the whole-checkpoint manifest), in either place it may sit. */
function treeSha(plan: object): string | null {
  const top = (plan as { model_tree_sha256?: unknown }).model_tree_sha256;
  const inModel = (plan as { model?: { tree_sha256?: unknown; model_tree_sha256?: unknown } }).model;
  const v = top ?? inModel?.model_tree_sha256 ?? inModel?.tree_sha256;
  return typeof v === "string" ? v : null;
}

/**
 * The run's attestation: the one already written when it is bound to this engine, else a fresh
 * one written exclusively. Refuses (PhaseError, step capture) when the engine is not running as
 * recorded, when the cache was never captured, or when an existing attestation names another process.
 */
export async function ensureAttestation(run: PreparedRun, opts: AttestOptions): Promise<Attestation> {
  const fail = (message: string, input: string, fix: string, retryable = false) =>
    new PhaseError(run.engine, "capture", message, { retryable, input, fix });
  const { plan, planSha } = await readVerifiedPlan(run, "capture");
  const problems = await opts.backend.identityProblems(opts.handle, plan);
  if (problems.length)
    throw fail(
      `${run.engine} is not running as recorded in ${run.dir}: ${problems.join("; ")}`,
      "engine identity",
      "Attest only a running engine: start it (narwhal engine start) or let narwhal restart it from a fresh run.",
      true,
    );
  const file = path.join(run.dir, ATTESTATION_FILE);
  const process = await attestedProcess(opts);
  const existing = await readJsonIfExists<Attestation>(file);
  if (existing) {
    const stale = attestationProblems(existing, { engine: run.engine, plan_sha256: planSha, process });
    if (stale.length)
      throw fail(
        `${file} is stale: ${stale.join("; ")}`,
        ATTESTATION_FILE,
        "A run directory is immutable: attest a fresh prepared run (narwhal restarts the engine from one).",
      );
    return existing;
  }
  const layoutFile = path.join(run.dir, LAYOUT_FILE);
  const layout = await readJsonIfExists<CacheLayout>(layoutFile);
  if (!layout)
    throw fail(
      `${run.dir} has no ${LAYOUT_FILE}: the cache was never captured`,
      LAYOUT_FILE,
      `Capture the running engine's cache first (narwhal engine capture-cache --run ${run.dir}).`,
    );
  const compat = await readJsonIfExists<NixlCompatRecord>(path.join(run.dir, NIXL_COMPAT_FILE));
  const policyFile = path.join(run.dir, HANDSHAKE_POLICY_FILE);
  const policy = await readJsonIfExists<{ compatibility_hash?: unknown }>(policyFile);
  const attestation: Attestation = {
    schema: ATTESTATION_SCHEMA,
    engine: run.engine,
    node: plan.node.name,
    attested_at: new Date().toISOString(),
    attestation_url: opts.url,
    launch_token: plan.launch_token,
    process,
    plan_sha256: planSha,
    checked_sha256: (await fileSha(path.join(run.dir, CHECKED_FILE)))!,
    model: {
      config_sha256: plan.model.config_sha256,
      file_sha256: plan.model.file_sha256,
      tree_sha256: treeSha(plan),
    },
    cache_layout: {
      block_size: layout.block_size,
      num_gpu_blocks: layout.num_gpu_blocks,
      gpu_kv_cache_tokens: layout.gpu_kv_cache_tokens,
      cache_dtype: layout.cache_dtype,
      tensor_parallel_size: layout.tensor_parallel_size,
      sha256: (await fileSha(layoutFile))!,
    },
    nixl_compat_hash: compat?.hash ?? null,
    handshake_policy: policy
      ? {
          compatibility_hash: typeof policy.compatibility_hash === "string" ? policy.compatibility_hash : null,
          sha256: (await fileSha(policyFile))!,
        }
      : null,
  };
  // Two writers racing (a crash between write and return, a retry): the first one's file stands.
  if (!(await writeFileExclusive(file, JSON.stringify(attestation, null, 2) + "\n")))
    return ensureAttestation(run, opts);
  return attestation;
}

/** What an attestation must say to speak for this engine's running instance. */
export interface AttestationExpectation {
  engine: string;
  plan_sha256: string;
  process: AttestedProcess;
}

/** Why `a` does not speak for the expected engine instance (empty: it does). */
export function attestationProblems(a: Partial<Attestation>, want: AttestationExpectation): string[] {
  const problems: string[] = [];
  if (a.schema !== ATTESTATION_SCHEMA) problems.push(`schema is ${String(a.schema)}, not ${ATTESTATION_SCHEMA}`);
  if (a.engine !== want.engine) problems.push(`it attests ${String(a.engine)}, not ${want.engine}`);
  if (a.plan_sha256 !== want.plan_sha256)
    problems.push(`it binds plan ${String(a.plan_sha256).slice(0, 12)}, not ${want.plan_sha256.slice(0, 12)}`);
  const [got, exp] = [a.process, want.process];
  const who = (p: AttestedProcess | undefined) =>
    !p
      ? "no process"
      : p.kind === "native"
        ? `pid ${p.pid} (boot ${p.boot_id.slice(0, 8)}, start tick ${p.start_ticks})`
        : `container ${p.container_id.slice(0, 12)} (pid ${p.pid})`;
  const same =
    got?.kind === exp.kind &&
    (got.kind === "native" && exp.kind === "native"
      ? got.pid === exp.pid && got.boot_id === exp.boot_id && got.start_ticks === exp.start_ticks
      : got.kind === "container" && exp.kind === "container" && got.container_id === exp.container_id);
  if (!same) problems.push(`it is bound to ${who(got)}, the engine runs as ${who(exp)}`);
  return problems;
}

/** The expectation for the recorded handle (native: as recorded; container: its id). */
export function expectationOf(run: PreparedRun, handle: EngineHandle): AttestationExpectation {
  return {
    engine: run.engine,
    plan_sha256: run.plan_sha256,
    process:
      handle.kind === "native"
        ? { kind: "native", pid: handle.pid, boot_id: handle.boot_id, start_ticks: handle.start_ticks }
        : { kind: "container", container_id: handle.container_id, pid: null },
  };
}
