// state/desired-summary.json: what `narwhal status` needs of the last valid
// desired state the controller loaded (each engine's input hash, backend and
// role), under the key of the texts it was validated from (desired-key.ts) and
// the ssh files its nodes named, as they were. status validates desired/ again
// only when the key or one of those files differs: at 1000 engines that
// validation was most of status's time. Written by the lock holder only
// (atomically, 0600). A summary that is missing, unreadable, malformed or of
// another key is no summary: status validates as it always did.
import path from "node:path";
import * as z from "zod";
import type { DesiredState } from "../desired/types.js";
import type { RecordedValidation } from "../desired/load.js";
import { inspectNodeFileValues, sameNodeFiles } from "../desired/node-files.js";
import { readDesiredKey } from "../desired/desired-key.js";
import { readRegularFile, writeFileAtomic } from "./atomic-file.js";

export const DESIRED_SUMMARY_FILE = "desired-summary.json";

const FactsSchema = z
  .object({
    path: z.string().describe("absolute path the value resolves to"),
    kind: z.enum(["file", "missing", "not-file", "unreadable"]).describe("what was found there"),
    mode: z.number().int().optional().describe("permission bits of a file"),
    ownedByController: z.boolean().optional().describe("owned by the user the controller runs as"),
    code: z.string().optional().describe("errno code when it could not be looked at"),
  })
  .describe("an ssh file a node names, as validation found it");

const SummarySchema = z
  .object({
    key: z.string().describe("desired-key.ts: the texts validated, their directory and the launcher"),
    node_files: z
      .array(z.tuple([z.string(), FactsSchema]))
      .describe("each identity_file and known_hosts_file value the nodes name, with what validation found"),
    engines: z
      .record(
        z.string(),
        z.object({
          input_hash: z.string().describe("the engine's desired input hash"),
          backend: z.string().describe("native or container"),
          role: z.string().describe("its role in fleet.json"),
        }),
      )
      .describe("per desired engine, what status shows of it"),
  })
  .describe("the last valid desired state the controller loaded, as status reads it");

export type DesiredSummary = z.infer<typeof SummarySchema>;

const fileOf = (stateDir: string) => path.join(stateDir, DESIRED_SUMMARY_FILE);

/** What status shows of each desired engine: its input hash, backend and role, by name. */
export const summaryEngines = (desired: Pick<DesiredState, "specs">): DesiredSummary["engines"] =>
  Object.fromEntries(desired.specs.map((s) => [s.name, { input_hash: s.input_hash, backend: s.backend, role: s.role }]));

/** Record `desired` (a validation's result that carries its source); false when it carries none. */
export async function writeDesiredSummary(stateDir: string, desired: DesiredState): Promise<boolean> {
  if (!desired.source) return false;
  const summary: DesiredSummary = {
    key: desired.source.key,
    node_files: desired.source.node_files,
    engines: summaryEngines(desired),
  };
  const text = JSON.stringify(summary) + "\n";
  // A controller's first desired state is most often the one the last left recorded (every no-op
  // `reconcile --once`): the same text is not written again (a temp file, two fsyncs and a rename).
  const now = await readRegularFile(fileOf(stateDir)).catch(() => null);
  if (now?.kind !== "text" || now.text !== text) await writeFileAtomic(fileOf(stateDir), text);
  return true;
}

/**
 * The recorded engines when the summary stands for desired/ as it is now: the same key (texts, directory,
 * launcher) and every ssh file its nodes name found as validation found it. null: validate instead.
 */
export async function summaryIfCurrent(
  stateDir: string,
  dir: string,
  launcherDigest: string,
): Promise<DesiredSummary["engines"] | null> {
  const summary = await readSummary(stateDir);
  if (!summary || (await readDesiredKey(dir, launcherDigest)) !== summary.key) return null;
  const now = await inspectNodeFileValues(
    path.resolve(dir),
    summary.node_files.map(([v]) => v),
  );
  return sameNodeFiles(summary.node_files, now) ? summary.engines : null;
}

/** The summary recorded in `stateDir`; null when it is missing, unreadable or malformed. */
async function readSummary(stateDir: string): Promise<DesiredSummary | null> {
  const read = await readRegularFile(fileOf(stateDir)).catch(() => null);
  if (read?.kind !== "text") return null;
  try {
    return SummarySchema.parse(JSON.parse(read.text));
  } catch {
    return null;
  }
}

/**
 * The recorded validation, as validateDesired recognises one of the desired/ it reads (DesiredOverrides.recorded);
 * null when there is none. Whether it is of desired/ as it is now is for validateDesired to decide.
 */
export async function recordedValidation(stateDir: string): Promise<RecordedValidation | null> {
  const summary = await readSummary(stateDir);
  if (!summary) return null;
  const hashes = Object.entries(summary.engines).map(([name, e]) => [name, e.input_hash] as const);
  return { key: summary.key, node_files: summary.node_files, input_hashes: new Map(hashes) };
}
