// The whole checkpoint's identity (seed 000: "The private discovery record binds
// the checkpoint to its complete manifest and matched tree digest"). Every file
// under the model directory is hashed ON the engine's node by model_manifest.py
// (what it includes, why symlinks are followed and dot-entries left out: see the
// script), with a per-node cache keyed by each file's stat so an unchanged
// checkpoint is not read again; only the list of digests crosses the wire.

import fs from "node:fs/promises";
import path from "node:path";
import * as z from "zod";
import { packageRoot } from "../../app.js";
import { canonicalJson, sha256Hex } from "../../desired/hash.js";
import { CancelledError, NarwhalError } from "../../errors.js";
import type { HostAccess } from "../../hosts/types.js";
import { pythonScriptFailure } from "../../hosts/ssh-scripts.js";
import type { StepWait } from "../progress.js";
import { runHelper } from "../../hosts/stdlib-python.js";

export const MODEL_MANIFEST_SCHEMA = "narwhal.model-manifest/v1";
export const MODEL_MANIFEST_FILE = "model-manifest.json";
/** The cache directory's name under a node's work directory. */
export const MANIFEST_CACHE_DIR = ".model-manifest-cache";

const sha256Hex64 = z.string().regex(/^[0-9a-f]{64}$/);

export const ManifestFileSchema = z
  .object({
    path: z.string().min(1).describe("path relative to the model directory, '/'-separated"),
    size: z.number().int().nonnegative().describe("bytes of the file (a symlink's target)"),
    sha256: sha256Hex64.describe("sha256 of the file's bytes"),
  })
  .strict()
  .describe("one regular file of the checkpoint");
export type ManifestFile = z.infer<typeof ManifestFileSchema>;

const ScriptResultSchema = z
  .object({
    files: z.array(ManifestFileSchema).describe("every regular file, sorted by path (code points)"),
    hashed: z.number().int().nonnegative().describe("files read and hashed by this run"),
    cached: z.number().int().nonnegative().describe("files whose digest came from the node's cache"),
    cache_error: z.string().nullable().describe("why the cache could not be written, or null"),
  })
  .strict()
  .describe("model_manifest.py's answer");

const ScriptFailureSchema = z
  .object({
    error: z.string().describe("what is wrong"),
    path: z.string().describe("the path at fault on the node"),
    errno: z.string().describe("errno name, e.g. ENOENT"),
  })
  .strict()
  .describe("model_manifest.py's refusal (exit 3)");

/** model-manifest.json (schema narwhal.model-manifest/v1). */
export interface ModelManifest {
  schema: typeof MODEL_MANIFEST_SCHEMA;
  model_dir: string;
  node: string;
  /** sha256 of the canonical JSON of `files`. */
  tree_sha256: string;
  files: ManifestFile[];
  computed_at: string;
}

/** What one manifest run did besides the manifest: the counts prove the cache works. */
export interface ManifestRun {
  manifest: ModelManifest;
  hashed: number;
  cached: number;
  cache_error: string | null;
}

/** The tree digest: sha256 of the canonical JSON of the file list (sorted by path). */
export function treeSha256(files: readonly ManifestFile[]): string {
  return sha256Hex(canonicalJson(files));
}

/** The cache file for one model directory: one per directory, so engines of other models never contend. */
export function manifestCacheFile(cacheDir: string, modelDir: string): string {
  return path.posix.join(cacheDir, `${sha256Hex(modelDir).slice(0, 16)}.json`);
}

export function manifestScriptPath(): string {
  return path.join(packageRoot(), "src", "phases", "host", "model_manifest.py");
}

/** How far the hashing of the files to hash (the cached ones aside) has come: model_manifest.py's stderr lines. */
export interface HashProgress {
  files_done: number;
  files: number;
  bytes_done: number;
  bytes: number;
}

const PROGRESS_PREFIX = "NARWHAL_MANIFEST_PROGRESS ";

/** The live line of a manifest being hashed: "12.1 of 40.0 GiB hashed, 3 of 7 files". */
export function manifestWait(modelDir: string, p: HashProgress): StepWait {
  const gib = (n: number) => (n / 2 ** 30).toFixed(1);
  return {
    awaiting: `the manifest of ${modelDir} (hashing)`,
    limitMs: null,
    sofar: `${gib(p.bytes_done)} of ${gib(p.bytes)} GiB hashed, ${p.files_done} of ${p.files} files`,
  };
}

/** Each whole progress line of a stderr stream, told as it arrives (a chunk may end inside a line). */
function progressLines(tell: (p: HashProgress) => void): (chunk: string) => void {
  let rest = "";
  return (chunk) => {
    const lines = (rest + chunk).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) {
      if (!line.startsWith(PROGRESS_PREFIX)) continue;
      try {
        tell(JSON.parse(line.slice(PROGRESS_PREFIX.length)) as HashProgress);
      } catch {
        // A garbled progress line only costs the live view one update.
      }
    }
  };
}

export interface ManifestOptions {
  signal: AbortSignal;
  /** Told how far the hashing has come (at its start, then about every second). */
  onProgress?: (p: HashProgress) => void;
  /** Directory on the node for the digest cache; undefined: hash everything, keep nothing. */
  cacheDir?: string;
  now?: () => Date;
}

function checkpointFault(host: HostAccess, modelDir: string, said: z.infer<typeof ScriptFailureSchema>): NarwhalError {
  return new NarwhalError(
    `model manifest of ${modelDir} on node ${host.node}: ${said.error}: ${said.path} (${said.errno})`,
    {
      input: "model.dir (NARWHAL_MODEL_DIR)",
      fix: `Repair the checkpoint at ${modelDir} on node ${host.node} (every entry a readable file or directory; links must name something). Rerun discovery after changing the provisioned checkpoint.`,
      retryable: false,
    },
  );
}

/** The manifest of `modelDir` on the node, computed there; NarwhalError naming the node and the path at fault. */
export async function modelManifest(host: HostAccess, modelDir: string, opts: ManifestOptions): Promise<ManifestRun> {
  const what = `the model manifest of ${modelDir} on node ${host.node}`;
  const script = await fs.readFile(manifestScriptPath());
  const cacheFile = opts.cacheDir === undefined ? "-" : manifestCacheFile(opts.cacheDir, modelDir);
  // No deadline: a cold manifest takes as long as reading the weights once; cancellation stops it.
  const r = await runHelper(host, ["-", modelDir, cacheFile], {
    stdin: script,
    signal: opts.signal,
    ...(opts.onProgress ? { onStderr: progressLines(opts.onProgress) } : {}),
  });
  if (opts.signal.aborted) throw new CancelledError(what);
  const parsed = (() => {
    try {
      return JSON.parse(r.stdout.trim().split("\n").pop() ?? "") as unknown;
    } catch {
      return undefined;
    }
  })();
  if (r.code === 3) {
    const said = ScriptFailureSchema.safeParse(parsed);
    if (said.success) throw checkpointFault(host, modelDir, said.data);
  }
  const ok = r.code === 0 ? ScriptResultSchema.safeParse(parsed) : undefined;
  const stderr = r.stderr
    .split("\n")
    .filter((l) => !l.startsWith(PROGRESS_PREFIX))
    .join("\n");
  if (!ok?.success) throw pythonScriptFailure(host.node, what, { ...r, stderr });
  const { files, hashed, cached, cache_error } = ok.data;
  return {
    manifest: {
      schema: MODEL_MANIFEST_SCHEMA,
      model_dir: modelDir,
      node: host.node,
      tree_sha256: treeSha256(files),
      files,
      computed_at: (opts.now ?? (() => new Date()))().toISOString(),
    },
    hashed,
    cached,
    cache_error,
  };
}
