// `narwhal suspend ENGINE...|--all`, `narwhal resume ENGINE...|--all` (like
// `flux suspend`) and `narwhal retry ENGINE...`. With a controller holding the
// state lock the command writes a request file and waits for its answer
// (src/state/requests.ts; watch mode serves them); with none it takes the lock
// and changes the state itself. Either way the exit code says what was done.
import type { Config } from "../config.js";
import { LockHeldError, NarwhalError } from "../errors.js";
import { acquireStateLock, readLockStatus, type LockHolder } from "../state/lock.js";
import { readState, StateStore } from "../state/store.js";
import { awaitAck, withdrawRequest, writeRequest, type OperatorRequest } from "../state/requests.js";
import {
  applySuspension,
  requestedEngines,
  retryRefused,
  type RequestResult,
} from "../controller/operator-requests.js";
import { validateDesired } from "../desired/load.js";
import { closestName } from "../desired/did-you-mean.js";
import { EXIT } from "./exit-codes.js";
import { document, isMachineFormat, renderDocument } from "./documents.js";

export type Kind = OperatorRequest["kind"];

export const usage = (message: string, input: string, fix: string) =>
  new NarwhalError(message, { retryable: false, input, fix });

/** Engines the state records or desired/ names (best-effort: an invalid desired/ adds none). */
async function knownEngines(config: Config): Promise<string[]> {
  const [state, desired] = await Promise.all([
    readState(config.stateDir),
    validateDesired(config.desiredDir).catch(() => null),
  ]);
  return [...new Set([...Object.keys(state.engines), ...(desired?.state?.specs.map((s) => s.name) ?? [])])].sort();
}

/** Refuse names no engine has, before anything is written. */
function checkNames(names: string[], known: string[]): void {
  for (const n of names) {
    if (known.includes(n)) continue;
    const guess = closestName(n, known);
    throw usage(
      `no engine named ${n} in the state or desired state (engines: ${known.join(", ") || "none"})`,
      n,
      guess ? `Did you mean ${guess}?` : "Name engines narwhal status lists.",
    );
  }
}

/** No controller: the command holds the lock and changes the state itself. null: a controller holds it. */
async function applyHere(config: Config, kind: Kind, names: string[]): Promise<RequestResult[] | null> {
  let lock;
  try {
    lock = await acquireStateLock(config.stateDir);
  } catch (err) {
    if (err instanceof LockHeldError && (await readLockStatus(config.stateDir)).kind === "held") return null;
    throw err;
  }
  try {
    if (kind === "retry") {
      const suspended = (await readState(config.stateDir)).suspended ?? {};
      // A controller that starts gives every terminal failure a fresh budget (the planner's startup retry).
      return names.map((engine) =>
        suspended[engine]
          ? retryRefused(engine, suspended[engine])
          : {
              engine,
              ok: true,
              message:
                "no controller runs: the next narwhal reconcile gives it a fresh attempt budget if it failed terminally",
            },
      );
    }
    const store = await StateStore.open(config.stateDir);
    const results = await applySuspension(store, kind, names);
    await store.close();
    return results;
  } finally {
    await lock.release();
  }
}

function holderWords(holder: LockHolder | null): string {
  return holder ? `the controller (pid ${holder.pid} on ${holder.host}, since ${holder.since})` : "the controller";
}

/** Through the running controller: a request file, and its answer within the timeout. */
async function askController(config: Config, req: Omit<OperatorRequest, "id" | "at">, timeoutMs: number) {
  const id = await writeRequest(config.stateDir, req);
  const ack = await awaitAck(config.stateDir, id, timeoutMs);
  if (ack) return ack.results;
  const lock = await readLockStatus(config.stateDir);
  const holder = holderWords(lock.kind === "held" || lock.kind === "stale" ? lock.holder : null);
  if (await withdrawRequest(config.stateDir, id))
    throw new NarwhalError(
      `${holder} did not take the ${req.kind} request within ${timeoutMs / 1000} s; it was withdrawn, nothing was changed`,
      {
        retryable: true,
        input: `${config.stateDir}/requests`,
        fix: "Only watch mode (narwhal reconcile) takes requests: wait until a reconcile --once or apply ends and run it again; else check narwhal status and state/narwhal.log for a controller that hangs.",
      },
    );
  // Claimed: it is being applied; its answer is awaited once more before giving up.
  const late = await awaitAck(config.stateDir, id, timeoutMs);
  if (late) return late.results;
  throw new NarwhalError(
    `${holder} took the ${req.kind} request ${id} but did not answer within ${(2 * timeoutMs) / 1000} s`,
    {
      retryable: true,
      input: `${config.stateDir}/requests/${id}.claimed`,
      fix: "It may still apply it: check narwhal status and state/narwhal.log before asking again.",
    },
  );
}

const KINDS: Record<Kind, string> = { suspend: "SuspendResult", resume: "ResumeResult", retry: "RetryResult" };

export async function operatorRequest(
  config: Config,
  kind: Kind,
  opts: { engines: string[]; all: boolean; timeoutMs: number; format: string },
  out: (s: string) => void,
): Promise<number> {
  if (opts.all && opts.engines.length)
    throw usage("name engines or give --all, not both", "--all", `Run narwhal ${kind} --all, or name the engines.`);
  if (!opts.all && !opts.engines.length)
    throw usage(
      `narwhal ${kind} needs an engine`,
      "ENGINE",
      `Name one or more engines${kind === "retry" ? "" : ", or give --all"}.`,
    );
  const known = await knownEngines(config);
  const names = requestedEngines({ engines: opts.engines, all: opts.all }, known);
  checkNames(names, known);
  const results =
    (await applyHere(config, kind, names)) ??
    (await askController(config, { kind, engines: opts.all ? [] : names, all: opts.all }, opts.timeoutMs));
  const ok = results.every((r) => r.ok);
  if (isMachineFormat(opts.format)) out(renderDocument(document(KINDS[kind], { ok, results }), opts.format));
  else for (const r of results) out(`${r.engine}: ${r.message}`);
  return ok ? EXIT.ok : EXIT.invalid;
}
