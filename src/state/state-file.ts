// Reading narwhal.json: what is at that path must be a regular file holding a
// state file of this version whose every engine record has the shape the
// controller and `status` rely on. Anything else is a typed StateFileError,
// never a hang (a FIFO, a symlink to /dev/zero) and never a TypeError later (a
// `null` record). The controller sets such a file aside; `status` reports it.
// The schema checks the types consumers rely on and lets unknown fields through:
// a field added to EngineRecord needs nothing here, a field removed or retyped does.
import * as z from "zod";
import { StateFileError } from "../errors.js";
import type { StateFile } from "./store.js";
import { readRegularFile } from "./atomic-file.js";
import { hasIntactSeal } from "./state-seal.js";

/**
 * 2: a snapshot's evidence may be a reference to its run directory (evidence-refs.ts).
 * 3: a record's applied inputs may be a reference to their file (applied-inputs.ts).
 * 4: a journal line may say only when engines were observed (state-journal.ts): a resync of N engines
 *    appended N whole records (10 MB at 1000 converged engines, every 10 s) to move their observed_at.
 * An older file is read as it is and rewritten in this version when the store opens it; a narwhal of
 * an older version refuses a newer file (it would read a reference as the inputs themselves).
 */
export const STATE_VERSION = 4;
const READABLE_VERSIONS = new Set([1, 2, 3, STATE_VERSION]);

const nullableString = z.string().nullable();
const anyObject = z.looseObject({});

const HandleSchema = z
  .discriminatedUnion("kind", [
    z.looseObject({ kind: z.literal("native"), pid: z.number().int().positive(), pgid: z.number().int(), boot_id: z.string(), start_ticks: z.number(), launch_token: z.string() }),
    z.looseObject({ kind: z.literal("container"), container_id: z.string().min(1), launch_token: z.string(), docker_host: z.string().optional() }),
  ])
  .describe("the live engine: a native process (pid, start ticks, boot id) or a container id, with its launch token");

const ConditionSchema = z
  // status is any string: which values a condition takes is status-view's business, and a new one must not set a state aside.
  // The time is optional: state files written before lastTransitionTime (they said `at`) are still good.
  .looseObject({ type: z.string(), status: z.string(), reason: z.string(), message: z.string(), lastTransitionTime: z.string().optional().describe("when status last changed") })
  .describe("one status condition (Ready, UpToDate, Failed)");

const HistoryEntrySchema = z
  .looseObject({ at: z.string(), from: z.string(), to: z.string(), event: z.string().optional(), note: z.string().optional() })
  .describe("one phase transition");

const ErrorRecordSchema = z
  .looseObject({ name: z.string(), message: z.string(), retryable: z.boolean() })
  .describe("the last error, as persisted by toErrorRecord");

export const EngineRecordSchema = z
  .looseObject({
    engine: z.string().min(1).describe("engine name; equals its key in `engines`"),
    backend: z.string().describe("native or container"),
    phase: z.string().describe("machine phase, e.g. captured"),
    desired_hash: z.string().describe("input hash of the desired spec"),
    running_hash: nullableString.describe("input hash of the plan the live engine was started from"),
    group_signature: nullableString.describe("cache-equivalence group signature"),
    run_dir: nullableString.describe("run directory of the current plan"),
    plan_sha256: nullableString.describe("sha256 of the plan's launch.json"),
    handle: HandleSchema.nullable(),
    inspection: anyObject.nullable().describe("summary of inspection.json"),
    checked: anyObject.nullable().describe("summary of checked.json"),
    layout: anyObject.nullable().describe("captured cache layout"),
    conditions: z.array(ConditionSchema),
    last_error: ErrorRecordSchema.nullable(),
    attempts: z.number().int().nonnegative().describe("attempts of the current step"),
    retry_at: z.number().nullable().describe("epoch ms of the next retry"),
    history: z.array(HistoryEntrySchema),
    snapshot: z.unknown().describe("xstate persisted snapshot; checked when restored (controller.build)"),
    updated_at: z.string().describe("ISO time of the last write"),
    role: z.string().optional().describe("the role it was applied with (fleet.json); absent in files written before roles were kept"),
    applied_inputs: z
      .record(z.string(), z.unknown())
      .nullable()
      .optional()
      .describe(
        'the hashed inputs (no secrets: the API key as its sha256) of the spec last applied, so a plan can name the fields a change touches; from version 3 written as {"$inputs": sha256}, naming inputs/<sha256>.json',
      ),
    observed_at: z.string().optional().describe("ISO time a controller last observed this engine (liveness, health, key)"),
    halted: z.string().nullable().optional().describe("why a rollout halted on this engine (its replacement failed); null or absent: not halted"),
  })
  .describe("one engine's record in narwhal.json");

const ProofEndSchema = z
  .looseObject({ engine: z.string().min(1), launch_token: z.string(), run_dir: nullableString, node: nullableString })
  .describe("one engine of a proven pair: the instance (launch token) it ran as");

export const ProofSchema = z
  .looseObject({
    prefill: ProofEndSchema,
    decode: ProofEndSchema,
    passed: z.boolean().describe("whether KV moved from the prefill to the decode as proven"),
    cause: nullableString.describe("why it did not (null when it passed)"),
    message: z.string().describe("what an operator reads"),
    at: z.string().describe("ISO time of the proof or the scrape"),
    source: z.enum(["proof", "watch"]).describe("a transfer proof, or the periodic scrape of the decode"),
    failures: z.number().int().nonnegative().describe("consecutive failed proofs of this pair against its current prefill instance"),
  })
  .describe("the latest KV-transfer proof of one prefill → decode pair");

export const StateFileSchema = z
  .looseObject({
    version: z.number().describe("state file format version"),
    engines: z.record(z.string(), EngineRecordSchema).describe("one record per engine, keyed by engine name"),
    proofs: z.record(z.string(), ProofSchema).optional().describe("the latest KV-transfer proof of each prefill → decode pair, keyed prefill>decode"),
    suspended: z.record(z.string(), z.string()).optional().describe("engines suspended by narwhal suspend, each with the ISO time it was suspended: observed, never changed"),
    journal_seq: z.number().int().nonnegative().optional().describe("the last narwhal.journal entry this file holds (absent: 0, a file from before the journal)"),
  })
  .superRefine((state, ctx) => {
    for (const [key, record] of Object.entries(state.engines)) {
      if (record.engine !== key) ctx.addIssue({ code: "custom", path: ["engines", key, "engine"], message: `names engine "${record.engine}" under key "${key}"` });
    }
  })
  .describe("narwhal.json: the controller's index of what it knows about each engine");

function jsonPath(path: ReadonlyArray<PropertyKey>): string {
  return "$" + path.map((k) => (typeof k === "number" ? `[${k}]` : /^[a-z_][a-z0-9_]*$/i.test(String(k)) ? `.${String(k)}` : `[${JSON.stringify(String(k))}]`)).join("");
}

const SET_ASIDE_FIX = "Run `narwhal reconcile`: it moves the file aside and rebuilds the state from the engines that run, or move the file away yourself.";

/** The state file at `file`, or null when there is none. Throws StateFileError for anything that is not a usable state file. */
export async function readStateFile(file: string): Promise<StateFile | null> {
  const read = await readRegularFile(file);
  if (read.kind === "missing") return null;
  if (read.kind === "not-regular") {
    throw new StateFileError("refused", `state file ${file} is ${read.what}, not a regular file`, { input: file, fix: SET_ASIDE_FIX });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(read.text);
  } catch (err) {
    throw new StateFileError("corrupt", `state file ${file} does not parse: ${(err as Error).message}`, { input: file, fix: SET_ASIDE_FIX, cause: err });
  }
  // Check the version first: a newer narwhal's file may have other records, and must be refused, not set aside.
  const version = (parsed as { version?: unknown } | null)?.version;
  if (typeof version === "number" && !READABLE_VERSIONS.has(version)) {
    throw new StateFileError("unsupported", `state file version ${version} is not supported (expected ${STATE_VERSION})`, {
      input: file,
      fix: "Use the narwhal version that wrote this state directory, or another --state directory.",
    });
  }
  // A base the store wrote and sealed holds only records that were checked or made in this shape (state-seal.ts).
  const sealed = version === STATE_VERSION && hasIntactSeal(read.bytes, STATE_VERSION);
  if (typeof parsed === "object" && parsed !== null) delete (parsed as { seal?: unknown }).seal; // the next write seals what it writes
  const checked = sealed ? null : StateFileSchema.safeParse(parsed);
  if (checked && !checked.success) {
    const issues = checked.error.issues.slice(0, 3).map((i) => `${jsonPath(i.path)}: ${i.message}`);
    const more = checked.error.issues.length > 3 ? ` (and ${checked.error.issues.length - 3} more)` : "";
    throw new StateFileError("corrupt", `state file ${file} is not a narwhal state file: ${issues.join("; ")}${more}`, { input: file, fix: SET_ASIDE_FIX });
  }
  return parsed as StateFile; // the text as written: unknown fields a newer minor version added are kept
}
