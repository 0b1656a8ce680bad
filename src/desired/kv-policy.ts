// fleet.json's `kv_transfer` block (issue 11): whether and how the KV path of
// each prefill → decode pair is proven before it serves, with its documented
// defaults applied. The defaults live in the schema so the file and the code
// cannot disagree: a fleet without the block gets exactly what `{}` parses to.
import * as z from "zod";
import type { KvPolicy } from "../controller/plan-types.js";

export const KvTransferSchema = z
  .object({
    prove: z
      .boolean()
      .default(true)
      .describe("Prove each prefill → decode pair with one real KV transfer before it serves (default true)"),
    on_failure: z
      .enum(["restart_decode", "hold"])
      .default("restart_decode")
      .describe(
        'A failed proof: "restart_decode" (default) restarts the decode, up to max_decode_restarts in a row; "hold" keeps the pair out of serving',
      ),
    on_prefill_restart: z
      .enum(["reprove", "restart_decodes"])
      .default("reprove")
      .describe(
        'A prefill replaced or restarted: "reprove" (default) proves its decodes again; "restart_decodes" restarts its proven decodes first (stale peer metadata)',
      ),
    max_decode_restarts: z
      .number()
      .int("must be a whole number of restarts")
      .min(0, "must be 0 (never restart) or more")
      .default(1)
      .describe(
        "Restarts of a decode after failed proofs of one pair in a row (against one prefill instance) before the pair is held (default 1)",
      ),
    watch_interval_s: z
      .number()
      .int("must be a whole number of seconds")
      .min(0, "must be 0 (off) or more seconds")
      .default(30)
      .describe("Watch mode: seconds between scrapes of the decodes' KV metrics; 0 turns the scrape off (default 30)"),
  })
  .strict()
  .describe("How the KV transfer of prefill → decode pairs is proven; every field optional");

export type KvTransferBlock = z.output<typeof KvTransferSchema>;

/** Proofs on; a failed proof restarts the decode once; a prefill restart re-proves its decodes; a scrape every 30 s. */
export const DEFAULT_KV: KvPolicy = Object.freeze(KvTransferSchema.parse({}));

export function kvPolicy(block: KvTransferBlock | undefined): KvPolicy {
  return { ...(block ?? DEFAULT_KV) };
}
