// The model half of host inspection, read on the engine's node: the config.json
// digest the launch record pins, the whole checkpoint's manifest and tree digest, the metadata the plan derives flags from
// (auto_map, convolutional SSM state), and a GGUF file's digest. Read here,
// before prepare, so prepare builds the plan from what the node holds and
// never reads a checkpoint on the controller's machine.

import path from "node:path";
import type { EngineSpec } from "../desired/types.js";
import type { HostAccess } from "../hosts/types.js";
import { IoError } from "../errors.js";
import { fileSha256OnNode, modelConfigSha256 } from "./host/model-hash.js";
import { modelManifest, type ModelManifest } from "./host/model-manifest.js";
import { problemFromError, type InspectionProblem } from "./inspect-problems.js";
import { readModelMeta, type ModelMeta } from "./model-meta.js";
import { lastFlagValue } from "./plan.js";

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

export async function observeModel(
  host: HostAccess,
  spec: EngineSpec,
  signal: AbortSignal,
  problems: InspectionProblem[],
  manifestCacheDir?: string,
): Promise<ModelObservation> {
  const configSha = await modelConfigSha256(host, spec.model.dir, signal).catch((err: unknown) => {
    problems.push(problemFromError(err, "model.dir"));
    return undefined;
  });
  // A directory without a readable config.json is already reported; its manifest would only say so again.
  const manifest =
    configSha === undefined
      ? undefined
      : await modelManifest(host, spec.model.dir, {
          signal,
          ...(manifestCacheDir === undefined ? {} : { cacheDir: manifestCacheDir }),
        }).then(
          (run) => run.manifest,
          (err: unknown) => {
            problems.push(problemFromError(err, "model.dir (NARWHAL_MODEL_DIR)"));
            return undefined;
          },
        );
  // Native paths resolve on the host (seed 000): a separate tokenizer or HF config named in the
  // serving arguments is read there too. A container's paths resolve inside the image instead.
  const extra = spec.launch.runtime.extra_args;
  const tokenizer = spec.backend === "native" ? lastFlagValue(extra, "--tokenizer") : undefined;
  const hfConfig = spec.backend === "native" ? lastFlagValue(extra, "--hf-config-path") : undefined;
  const meta = await readModelMeta(host, spec.model.dir, tokenizer, hfConfig);
  // A GGUF file inside the directory (the rules require it) was hashed by the manifest already: not read twice.
  const listed = spec.model.path
    ? manifest?.files.find((f) => f.path === path.posix.relative(spec.model.dir, spec.model.path!))?.sha256
    : undefined;
  const fileSha = spec.model.path ? (listed ?? (await ggufSha256(host, spec.model.path, signal, problems))) : null;
  return { config_sha256: configSha, meta, file_sha256: fileSha, manifest };
}
