// Model checkpoint identity (seed 000: `sha256sum "$NARWHAL_MODEL_DIR/config.json"`).
// Streamed so a large file never sits in memory whole.

import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import path from "node:path";
import { CancelledError, NarwhalError } from "../../errors.js";

/** Hex sha256 of a file's bytes. */
export async function sha256File(file: string, signal?: AbortSignal): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file, signal ? { signal } : {})) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** sha256 of <modelDir>/config.json, with failures that name model.dir. */
export async function modelConfigSha256(modelDir: string, signal: AbortSignal): Promise<string> {
  const file = path.join(modelDir, "config.json");
  try {
    return await sha256File(file, signal);
  } catch (err) {
    if (signal.aborted) throw new CancelledError(`hashing ${file}`);
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new NarwhalError(`model config ${file} cannot be read (${code})`, {
      input: "model.dir (NARWHAL_MODEL_DIR)",
      fix: "Provision the checkpoint at model.dir, or point NARWHAL_MODEL_DIR at it. Rerun discovery after changing the provisioned checkpoint.",
      retryable: false,
      cause: err,
    });
  }
}
