// Model checkpoint identity (seed 000: `sha256sum "$NARWHAL_MODEL_DIR/config.json"`),
// read on the engine's node: the checkpoint provisioned there is the one the engine loads.

import path from "node:path";
import { sha256Hex } from "../../desired/hash.js";
import { CancelledError, NarwhalError } from "../../errors.js";
import type { HostAccess } from "../../hosts/types.js";
import { remoteIoError } from "../../hosts/ssh-scripts.js";
import { fileErrno } from "./host-read.js";

/** config.json is a few KiB; anything this large is not a model config. */
const MAX_CONFIG_BYTES = 16 * 1024 * 1024;

/** sha256 of <modelDir>/config.json on the node, with failures that name model.dir. */
export async function modelConfigSha256(host: HostAccess, modelDir: string, signal: AbortSignal): Promise<string> {
  return sha256Hex(await readModelConfig(host, modelDir, signal));
}

/** <modelDir>/config.json's bytes on the node, with failures that name model.dir. */
export async function readModelConfig(host: HostAccess, modelDir: string, signal: AbortSignal): Promise<Buffer> {
  const file = path.posix.join(modelDir, "config.json");
  let bytes: Buffer;
  try {
    // Small: fetched whole and hashed here, so both kinds of host hash the same way.
    bytes = await host.readFile(file, { maxBytes: MAX_CONFIG_BYTES });
  } catch (err) {
    if (signal.aborted) throw new CancelledError(`hashing ${file}`);
    throw new NarwhalError(`model config ${file} cannot be read on node ${host.node} (${fileErrno(err)})`, {
      input: "model.dir (NARWHAL_MODEL_DIR)",
      fix: `Provision the checkpoint at model.dir on node ${host.node}, or point NARWHAL_MODEL_DIR at it. Rerun discovery after changing the provisioned checkpoint.`,
      retryable: false,
      cause: err,
    });
  }
  if (signal.aborted) throw new CancelledError(`hashing ${file}`);
  return bytes;
}

/**
 * sha256 of a large file (a GGUF checkpoint, gigabytes) computed on the node by
 * `sha256sum`, so the bytes never cross the wire. The file's own errno is kept.
 */
export async function fileSha256OnNode(host: HostAccess, file: string, signal: AbortSignal): Promise<string> {
  const r = await host.run(["sha256sum", "--", file], { signal, env: { LC_ALL: "C" } });
  const digest = /^([0-9a-f]{64})\s/.exec(r.stdout)?.[1];
  if (r.code === 0 && digest) return digest;
  if (r.code === 127 || r.code === 126)
    throw new NarwhalError(`sha256sum cannot be executed on node ${host.node}`, {
      input: `node ${host.node}`,
      fix: `Install coreutils (sha256sum) on node ${host.node}.`,
      retryable: false,
    });
  throw remoteIoError(host.node, "open", file, r.stderr);
}
