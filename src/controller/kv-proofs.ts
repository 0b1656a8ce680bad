// Running what the planner asked of a P/D pair: one transfer proof (the IO is
// src/phases/kv-proof.ts), recorded as the pair's latest proof; and the watch
// mode's cheap scrape of every serving decode, which records what it finds
// (silent decode-only, failures growing) for the next plan to act on.
import type { EngineContext } from "../../machines/engine.js";
import type { StateStore } from "../state/store.js";
import type { Logger } from "../log.js";
import { describeFailure } from "../errors.js";
import type { Failpoint } from "../failpoints.js";
import type { KvProofResult, ProofEnd } from "../phases/kv-proof.js";
import type { KvCounters } from "../phases/kv-watch.js";
import { decodeOnlyFinding } from "../phases/kv-watch.js";
import { pairKey, type Action, type Observed, type ObservedProof, type ServingFleet } from "./plan-types.js";
import { failuresInARow, proofIsCurrent } from "./kv-pairs.js";

export interface KvIo {
  prove(prefill: ProofEnd, decode: ProofEnd, opts: { timeoutMs: number; signal?: AbortSignal }): Promise<KvProofResult>;
  scrape(decode: ProofEnd, opts: { timeoutMs: number; signal?: AbortSignal }): Promise<KvCounters>;
}

/** The running instance of an engine, as a proof names it (null: it does not run). */
export function proofEnd(
  engine: string,
  ctx: Partial<EngineContext> | undefined,
  node: string | null,
): ProofEnd | null {
  if (!ctx?.run || !ctx.handle) return null;
  return { engine, run_dir: ctx.run.dir, launch_token: ctx.handle.launch_token, node };
}

type Prove = Extract<Action, { kind: "prove" }>;

/**
 * Run a planned proof if it still applies (both engines captured, running the instances the plan
 * saw), and record the result. A proof that could not run (its run directory unreadable) is
 * recorded as a failed request, so the planner's bounds apply to it too. Returns the record, or
 * null when nothing was proven (stale action, shutdown).
 */
export async function runProof(
  a: Prove,
  ends: { prefill: ProofEnd | null; decode: ProofEnd | null },
  observed: Observed | null,
  deps: {
    io: KvIo;
    store: StateStore;
    log: Logger;
    timeoutMs: number;
    signal?: AbortSignal;
    failpoint?: Failpoint;
    /** Whether an end is still the instance the proof began with (captured, same launch token, not found gone). */
    current?: (end: ProofEnd) => boolean | Promise<boolean>;
  },
): Promise<ObservedProof | null> {
  const { prefill, decode } = ends;
  const seen = (end: ProofEnd | null) =>
    end !== null && observed?.engines[end.engine]?.handle?.launch_token === end.launch_token;
  if (!prefill || !decode || !seen(prefill) || !seen(decode)) return null; // a newer plan follows
  // A proof of this pair recorded since the plan looked (a plan made while it ran asked again): nothing to prove.
  const key = pairKey(prefill.engine, decode.engine);
  if (JSON.stringify(deps.store.proofs()[key] ?? null) !== JSON.stringify(observed?.proofs?.[key] ?? null)) return null;
  deps.log.info(`proving KV transfer from ${prefill.engine}: ${a.reason}`, { engine: decode.engine });
  deps.failpoint?.("kv:prove:before");
  let result: KvProofResult;
  try {
    result = await deps.io.prove(prefill, decode, { timeoutMs: deps.timeoutMs, signal: deps.signal });
  } catch (err) {
    if (deps.signal?.aborted) return null;
    result = {
      passed: false,
      cause: "request-failed",
      message: `the proof of ${prefill.engine} → ${decode.engine} could not run: ${describeFailure(err)}`,
      checks: [],
      at: new Date().toISOString(),
      evidence: [],
    };
  }
  // Killed here, the evidence is written and the state knows nothing: the rerun proves again (fresh file names).
  deps.failpoint?.("kv:prove:after");
  // A proof runs beside its engines' own steps: one that failed because an end was being replaced or
  // stopped meanwhile says nothing of the new instance, and is no finding to warn about.
  if (!result.passed && deps.current && !((await deps.current(prefill)) && (await deps.current(decode)))) {
    deps.log.debug(
      `the proof of ${prefill.engine} → ${decode.engine} ended (${result.cause}) after an end moved on: not recorded; a newer plan follows`,
      { engine: decode.engine },
    );
    return null;
  }
  const prev = deps.store.proofs()[key];
  const proof: ObservedProof = {
    prefill,
    decode,
    passed: result.passed,
    cause: result.passed ? null : result.cause,
    message: result.message,
    at: result.at,
    source: "proof",
    failures: result.passed ? 0 : failuresInARow(prev, prefill.launch_token),
  };
  await deps.store.setProof(key, proof);
  const line = `KV transfer from ${prefill.engine} ${result.passed ? "proven" : `failed its proof (${result.cause})`}: ${result.message}`;
  if (result.passed) deps.log.info(line, { engine: decode.engine });
  else deps.log.warn(line, { engine: decode.engine });
  return proof;
}

/**
 * One scrape of every decode the serving fleet pairs: counters against the last scrape of the same
 * instance; a finding marks each of its current passed proofs failed ("watch"), for the planner to
 * prove again. `last` keeps the counters between scrapes (by decode engine). Returns whether
 * anything was recorded.
 */
export async function scrapeDecodes(
  serving: ServingFleet | null,
  observed: Observed | null,
  ends: (engine: string) => ProofEnd | null,
  last: Map<string, { token: string; counters: KvCounters }>,
  deps: { io: KvIo; store: StateStore; log: Logger; timeoutMs: number; signal?: AbortSignal },
): Promise<boolean> {
  if (!serving || !observed) return false;
  const decodes = [...new Set((serving.pairs ?? []).map((p) => p.decode))];
  for (const name of [...last.keys()]) if (!decodes.includes(name)) last.delete(name);
  let recorded = false;
  for (const name of decodes) {
    const end = ends(name);
    if (!end) continue;
    let counters: KvCounters;
    try {
      counters = await deps.io.scrape(end, { timeoutMs: Math.min(deps.timeoutMs, 5000), signal: deps.signal });
    } catch (err) {
      // Not a finding: health and liveness judge an engine that does not answer.
      deps.log.debug(`cannot scrape KV metrics: ${describeFailure(err)}`, { engine: name });
      continue;
    }
    const prev = last.get(name);
    last.set(name, { token: end.launch_token, counters });
    if (!prev || prev.token !== end.launch_token) continue;
    const finding = decodeOnlyFinding(name, prev.counters, counters);
    if (!finding) continue;
    const proofs = Object.entries(deps.store.proofs()).filter(
      ([, p]) => p.decode.engine === name && p.passed && proofIsCurrent(p, observed),
    );
    for (const [key, p] of proofs) {
      await deps.store.setProof(key, {
        ...p,
        passed: false,
        cause: finding.cause,
        message: finding.message,
        at: counters.at,
        source: "watch",
      });
      recorded = true;
    }
    if (proofs.length)
      deps.log.warn(`KV transfer no longer proven: ${finding.message}; proving it again`, { engine: name });
  }
  return recorded;
}

/** Watch mode's scrapes of the serving decodes, keeping each decode's last counters between them. */
export class DecodeScrapes {
  private readonly last = new Map<string, { token: string; counters: KvCounters }>();

  constructor(private readonly deps: { io: KvIo; log: Logger; timeoutMs: number }) {}

  /** One scrape of every decode `serving` pairs; true when a finding was recorded (the fleet is planned again). */
  run(
    serving: ServingFleet | null,
    observed: Observed | null,
    ends: (engine: string) => ProofEnd | null,
    store: StateStore,
    signal: AbortSignal,
  ): Promise<boolean> {
    return scrapeDecodes(serving, observed, ends, this.last, { ...this.deps, store, signal });
  }
}
