// The model half of host inspection, read on the engine's node: the config.json
// digest the launch record pins, the whole checkpoint's manifest and tree digest, the metadata the plan derives flags from
// (auto_map, convolutional SSM state), and a GGUF file's digest. Read here,
// with the operator's remote-code opt-in compared against the auto_map,
// before prepare, so prepare builds the plan from what the node holds and
// never reads a checkpoint on the controller's machine.

import path from "node:path";
import type { EngineSpec } from "../desired/types.js";
import type { HostAccess } from "../hosts/types.js";
import { IoError } from "../errors.js";
import { fileSha256OnNode, readModelConfig } from "./host/model-hash.js";
import { sha256Hex } from "../desired/hash.js";
import { manifestWait, modelManifest, type HashProgress, type ModelManifest } from "./host/model-manifest.js";
import type { ProgressSink } from "./progress.js";
import { problemFromError, type InspectionProblem } from "./inspect-problems.js";
import { readModelMeta, type ModelMeta } from "./model-meta.js";
import { CONTAINER_MODEL_DIR, lastFlagValue } from "./plan.js";
import { optsIntoRemoteCode, TRUST_REMOTE_CODE } from "../desired/remote-code.js";

export interface ModelObservation {
  /** undefined when config.json could not be read (a problem says why). */
  config_sha256: string | undefined;
  meta: ModelMeta;
  file_sha256: string | null;
  /** undefined when the manifest could not be computed (a problem says why). */
  manifest: ModelManifest | undefined;
}

/** sha256 of the GGUF file NARWHAL_MODEL_PATH names; null with a problem naming it when it cannot be read. */
async function ggufSha256(
  host: HostAccess,
  file: string,
  signal: AbortSignal,
  problems: InspectionProblem[],
): Promise<string | null> {
  try {
    return await fileSha256OnNode(host, file, signal);
  } catch (err) {
    problems.push(
      err instanceof IoError
        ? {
            message: `model file ${file} cannot be read on node ${host.node} (${err.code})`,
            input: "NARWHAL_MODEL_PATH",
            fix: `Point NARWHAL_MODEL_PATH at the local GGUF file inside the model's snapshot directory on node ${host.node}.`,
            failure: "terminal",
          }
        : problemFromError(err, "NARWHAL_MODEL_PATH"),
    );
    return null;
  }
}

export interface ObserveModelOptions {
  signal: AbortSignal;
  /** Directory on the node for the manifest's digest cache (InspectOptions.manifestCacheDir). */
  manifestCacheDir?: string;
  waits?: ProgressSink;
}

export async function observeModel(
  host: HostAccess,
  spec: EngineSpec,
  problems: InspectionProblem[],
  { signal, manifestCacheDir, waits }: ObserveModelOptions,
): Promise<ModelObservation> {
  const config = await readModelConfig(host, spec.model.dir, signal).catch((err: unknown) => {
    problems.push(problemFromError(err, "model.dir"));
    return undefined;
  });
  const configSha = config && sha256Hex(config);
  // A directory without a readable config.json is already reported; its manifest would only say so again.
  const manifest =
    configSha === undefined
      ? undefined
      : await modelManifest(host, spec.model.dir, {
          signal,
          ...(manifestCacheDir === undefined ? {} : { cacheDir: manifestCacheDir }),
          ...(waits ? { onProgress: (p: HashProgress) => waits(manifestWait(spec.model.dir, p)) } : {}),
        }).then(
          (run) => run.manifest,
          (err: unknown) => {
            problems.push(problemFromError(err, "model.dir (NARWHAL_MODEL_DIR)"));
            return undefined;
          },
        );
  const extra = spec.launch.runtime.extra_args;
  const where = (flag: string) => metadataPath(spec, lastFlagValue(extra, flag));
  // config.json is read once for both its digest and its metadata (over ssh each read is a command).
  const known = new Map(config ? [[path.posix.join(spec.model.dir, "config.json"), config]] : []);
  const meta = await readModelMeta(host, spec.model.dir, where("--tokenizer"), where("--hf-config-path"), known);
  problems.push(...remoteCodeProblems(spec, host.node, meta));
  // A GGUF file inside the directory (the rules require it) was hashed by the manifest already: not read twice.
  const listed = spec.model.path
    ? manifest?.files.find((f) => f.path === path.posix.relative(spec.model.dir, spec.model.path!))?.sha256
    : undefined;
  const fileSha = spec.model.path ? (listed ?? (await ggufSha256(host, spec.model.path, signal, problems))) : null;
  return { config_sha256: configSha, meta, file_sha256: fileSha, manifest };
}

/**
 * Where prepare reads a --tokenizer / --hf-config-path on the engine's node (seed 000: "Native paths
 * resolve on the host; container paths resolve inside the image and its mounts"). Native: the path
 * itself. Container: a host path under model.dir, or one under /model (the model mount), is the
 * host's model directory; any other path is inside the image, null: the container check reads it.
 */
export function metadataPath(spec: EngineSpec, value: string | undefined): string | null | undefined {
  if (value === undefined || spec.backend === "native") return value;
  const dir = spec.model.dir.replace(/\/+$/, "");
  if (value === dir || value.startsWith(`${dir}/`)) return value;
  if (value === CONTAINER_MODEL_DIR || value.startsWith(`${CONTAINER_MODEL_DIR}/`))
    return dir + value.slice(CONTAINER_MODEL_DIR.length);
  return null;
}

/** The operator's --trust-remote-code and the checkpoint's auto_map must agree (remote-code.ts). */
export function remoteCodeProblems(spec: EngineSpec, node: string, meta: ModelMeta): InspectionProblem[] {
  const optIn = optsIntoRemoteCode(spec.launch.runtime.extra_args);
  const sources = meta.auto_map_sources ?? [];
  if (meta.auto_map && !optIn)
    return [
      {
        message: `${spec.name}: ${sources.join(", ")} on node ${node} declare(s) an auto_map, so loading this checkpoint runs its own Python code, and runtime.extra_args does not opt in with ${TRUST_REMOTE_CODE}`,
        input: "runtime.extra_args",
        fix: `Review the code the auto_map names (the checkpoint's *.py files), then add "${TRUST_REMOTE_CODE}" to ${spec.name}'s runtime.extra_args (or NARWHAL_ENGINE_ARGS); narwhal never runs remote code unasked.`,
        failure: "terminal",
      },
    ];
  // A tokenizer or config inside the image is read by the container check, which verifies the opt-in there.
  if (optIn && !meta.auto_map && !meta.in_image?.length)
    return [
      {
        message: `${spec.name}: runtime.extra_args passes ${TRUST_REMOTE_CODE} but neither the model (${spec.model.dir}) nor the tokenizer metadata on node ${node} declares an auto_map`,
        input: "runtime.extra_args",
        fix: `Remove ${TRUST_REMOTE_CODE} from ${spec.name}'s runtime.extra_args (and NARWHAL_ENGINE_ARGS): this checkpoint has no remote code to trust.`,
        failure: "terminal",
      },
    ];
  return [];
}
