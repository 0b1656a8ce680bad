// `narwhal engine prepare`: one engine's launch record plus the deployment
// environment → inspect → a fresh launch directory at --out. The record comes
// from desired/ (--desired, --engine), or from the role shell's
// NARWHAL_ENGINE_LAUNCH_CONFIG, which takes that engine's place in the desired
// launch records; the startup environment's seed-001 variables take precedence
// over deployment.env. Every record is validated before --out is created.
import fs from "node:fs/promises";
import path from "node:path";
import { loadDesired, type DesiredOverrides } from "../../desired/load.js";
import { parseJsonSafely } from "../../desired/json-safe.js";
import { DesiredStateError } from "../../errors.js";
import { inspect } from "../../phases/inspect.js";
import { nodeHostsFor } from "../../backends/for-config.js";
import { prepare, LAUNCH_FILE, API_KEY_FILE, readPlan } from "../../phases/prepare.js";
import { envFileFor } from "../../phases/run-env.js";
import { LAUNCH_FILE as RECORDS_FILE } from "../../desired/rules.js";
import { refusal } from "../../phases/action-error.js";
import { exists } from "../../state/atomic-file.js";
import { engineResult, type EngineResult } from "./result.js";
import type { ActionContext } from "./context.js";

const ACTION = "prepare";
/** Startup variables (seed 001) that take precedence over deployment.env. */
const STARTUP_VARIABLE = /^NARWHAL_(MODEL_REVISION|MODEL_PATH|ENGINE_ARGS|ENGINE_ENV|NODE_\d+_ATTESTATION_URL)$/;

export interface PrepareActionOptions {
  out: string;
  backend?: "container" | "native";
  desired: string;
  engine?: string;
}

/** The role shell's record: a bare launch record, or {"engines": {"engine-<n>": record}} with exactly one. */
async function recordFromEnv(file: string): Promise<{ record: Record<string, unknown>; engine?: string }> {
  const text = await fs.readFile(file, "utf8").catch((err: NodeJS.ErrnoException) => {
    throw refusal(ACTION, `NARWHAL_ENGINE_LAUNCH_CONFIG=${file} cannot be read (${err.code ?? err.message})`, {
      input: "NARWHAL_ENGINE_LAUNCH_CONFIG",
      fix: "Point NARWHAL_ENGINE_LAUNCH_CONFIG at the role's transferred launch record.",
    });
  });
  const parsed = parseJsonSafely(text, file);
  if (
    parsed.issues.length ||
    parsed.value === null ||
    typeof parsed.value !== "object" ||
    Array.isArray(parsed.value)
  ) {
    throw new DesiredStateError(
      parsed.issues.length
        ? parsed.issues
        : [{ file, path: "$", message: "must be a JSON object holding one launch record", rule: "syntax" }],
    );
  }
  const value = parsed.value as Record<string, unknown>;
  const engines = value.engines;
  if (engines && typeof engines === "object" && !Array.isArray(engines)) {
    const entries = Object.entries(engines as Record<string, unknown>);
    if (entries.length !== 1)
      throw new DesiredStateError([
        {
          file,
          path: "$.engines",
          message: `holds ${entries.length} launch records; a role's NARWHAL_ENGINE_LAUNCH_CONFIG holds exactly one`,
          rule: "schema",
        },
      ]);
    return { engine: entries[0]![0], record: entries[0]![1] as Record<string, unknown> };
  }
  return { record: value };
}

/** The engine a bare record belongs to: the only engine, or the one whose desired record has its role. */
async function inferEngine(desiredDir: string, role: unknown): Promise<string> {
  const doc = JSON.parse(await fs.readFile(path.join(desiredDir, RECORDS_FILE), "utf8").catch(() => "{}")) as {
    engines?: Record<string, { role?: unknown }>;
  };
  const names = Object.keys(doc.engines ?? {});
  const byRole = names.filter((n) => doc.engines![n]!.role === role);
  if (names.length === 1) return names[0]!;
  if (byRole.length === 1) return byRole[0]!;
  throw refusal(
    ACTION,
    `cannot tell which engine the launch record is for (${names.length} engines in ${desiredDir}, ${byRole.length} with role ${JSON.stringify(role)})`,
    { input: "--engine", fix: "Name it with --engine engine-<n> (or NARWHAL_ENGINE)." },
  );
}

export async function prepareAction(ctx: ActionContext, opts: PrepareActionOptions): Promise<EngineResult> {
  const out = path.resolve(opts.out);
  if (await exists(out)) {
    throw refusal(ACTION, `--out ${out} already exists`, {
      run: out,
      input: "--out",
      fix: "Preparation requires a fresh --out: name a directory that does not exist yet. Each run directory is immutable.",
    });
  }
  const desiredDir = path.resolve(opts.desired);
  const variables: Record<string, string> = {};
  for (const [k, v] of Object.entries(ctx.env)) {
    if (v !== undefined && v !== "" && STARTUP_VARIABLE.test(k))
      variables[k] = k === "NARWHAL_MODEL_PATH" ? path.resolve(v) : v;
  }
  const configFile = ctx.env.NARWHAL_ENGINE_LAUNCH_CONFIG;
  const fromEnv = configFile ? await recordFromEnv(path.resolve(configFile)) : undefined;
  let engine = opts.engine ?? ctx.env.NARWHAL_ENGINE ?? fromEnv?.engine;
  if (!engine && fromEnv) engine = await inferEngine(desiredDir, fromEnv.record.role);

  const overrides: DesiredOverrides = {
    variables,
    editLaunch: (document) => {
      if (!engine || !document || typeof document !== "object") return document;
      const doc = structuredClone(document) as { engines?: Record<string, Record<string, unknown>> };
      if (!doc.engines || typeof doc.engines !== "object") return document;
      if (fromEnv) doc.engines[engine] = structuredClone(fromEnv.record);
      // --backend selects how this record runs; validation then applies that backend's rules.
      if (opts.backend && doc.engines[engine]) doc.engines[engine]!.backend = opts.backend;
      return doc;
    },
  };
  const state = await loadDesired(desiredDir, overrides);
  const spec = engine
    ? state.specs.find((s) => s.name === engine)
    : state.specs.length === 1
      ? state.specs[0]
      : undefined;
  if (!spec) {
    throw refusal(
      ACTION,
      engine
        ? `${desiredDir} has no engine ${engine}`
        : `${desiredDir} has ${state.specs.length} engines; say which to prepare`,
      {
        input: "--engine",
        fix: `Name one of ${state.specs.map((s) => s.name).join(", ")} with --engine.`,
      },
    );
  }
  const backend = ctx.backends[spec.backend];
  const imageId = await backend.runtimeIdentity(spec, ctx.signal);
  // Inspect the engine's own node: the local host, or over ssh when its node record says so.
  const hosts = nodeHostsFor(ctx.config);
  hosts.learn([spec]);
  const inspection = await inspect(spec, {
    signal: ctx.signal,
    imageId,
    host: hosts.access(spec.node.name),
    manifestCacheDir: hosts.manifestCacheDir(spec.node.name),
  }).finally(() => hosts.close());
  const prepared = await prepare(spec, inspection, { stateDir: ctx.config.stateDir, app: ctx.app, out });
  const { plan } = await readPlan(prepared.dir);
  const files: Record<string, string> = {
    [LAUNCH_FILE]: path.join(prepared.dir, LAUNCH_FILE),
    [envFileFor(spec.backend)]: path.join(prepared.dir, envFileFor(spec.backend)),
  };
  if (await exists(path.join(prepared.dir, API_KEY_FILE))) files[API_KEY_FILE] = path.join(prepared.dir, API_KEY_FILE);
  return engineResult(ACTION, prepared.dir, {
    engine: spec.name,
    files,
    summary: [
      `${spec.backend} plan ${prepared.plan_sha256.slice(0, 12)} for ${spec.role} on ${inspection.accelerator} (${plan.gpu.visibility_env}=${plan.gpu.ids.join(",")})`,
      `group ${plan.group_signature}, model ${plan.model.path}${plan.model.file_sha256 ? ` sha256 ${plan.model.file_sha256.slice(0, 12)}` : ""}, revision ${plan.model.revision ?? "-"}`,
      `launch record from ${fromEnv ? `NARWHAL_ENGINE_LAUNCH_CONFIG=${configFile}` : path.join(desiredDir, RECORDS_FILE)}`,
    ],
    details: {
      backend: spec.backend,
      plan_sha256: prepared.plan_sha256,
      input_hash: prepared.input_hash,
      group_signature: plan.group_signature,
      launch_token: prepared.launch_token,
      model: plan.model,
      application: plan.application,
      record_source: fromEnv ? path.resolve(configFile!) : path.join(desiredDir, RECORDS_FILE),
    },
  });
}
