// kv-transfer.json: the evidence of one KV proof, written exclusively into
// both run directories (the prefill's and the decode's). A later proof of the
// same run, or the same prefill paired with another decode, takes the next
// fresh name (kv-transfer.2.json, ...): evidence is never rewritten. No secret
// goes in: the requests' headers are not part of the document.
import path from "node:path";
import { freshName } from "../state/run-dir.js";
import { writeFileExclusive } from "../state/atomic-file.js";
import { ioFailure } from "../errors.js";

export const KV_TRANSFER_FILE = "kv-transfer.json";
export const KV_TRANSFER_SCHEMA = "narwhal.kv-transfer/v1";

/** Write `doc` under the first free kv-transfer*.json name of `dir`; returns the path written. */
export async function writeEvidence(dir: string, engine: string, doc: object): Promise<string> {
  const text = JSON.stringify(doc, null, 2) + "\n";
  try {
    // Another writer may take the fresh name between the look and the link: take the next one.
    for (;;) {
      const file = path.join(dir, await freshName(dir, KV_TRANSFER_FILE));
      if (await writeFileExclusive(file, text)) return file;
    }
  } catch (err) {
    throw ioFailure(err, { engine, input: dir });
  }
}

/** Both run directories' evidence, the prefill's first. */
export async function writeBothEvidence(
  ends: Array<{ engine: string; run_dir: string }>,
  doc: object,
): Promise<string[]> {
  const out: string[] = [];
  for (const e of ends) out.push(await writeEvidence(e.run_dir, e.engine, doc));
  return out;
}
