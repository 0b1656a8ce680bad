// start: ensure this run's engine is running (the backend adopts it by launch
// token before it ever creates one), then wait for /health within the ready
// budget. A crash during startup is traced to its cause from the startup log.
import type { EngineHandle, PreparedRun } from "./types.js";
import type { EngineBackend } from "../backends/types.js";
import { readVerifiedPlan } from "./plan-binding.js";
import { NarwhalError, nodeFaultOf, PhaseError, type FailureClass } from "../errors.js";
import { httpRequest, joinUrl, sleep } from "./http.js";
import { redactText } from "../log.js";
import type { ProgressSink } from "./progress.js";

export interface StartOptions {
  backend: EngineBackend;
  signal: AbortSignal;
  readySeconds: number;
  stopGraceMs: number;
  /** Values to strip from log excerpts quoted in errors. */
  secrets?: string[];
  /** Stop what this start created when it fails (default); start-shared does its own ordered cleanup. */
  stopOnFailure?: boolean;
  /** Told what the start waits for (its /health, within readySeconds), for the operator's view. */
  waits?: ProgressSink;
}

/**
 * Name the input an exit points at, using vLLM's own wording in the log, and what retrying can
 * do about it: a rejected command line or a request for trust_remote_code or the DS layout fails
 * the same way from the same inputs (terminal until the desired state changes); a stranger on a
 * planned port is outwaited; anything else (a crash, an accelerator fault) is retried.
 */
export function diagnoseStartupLog(log: string): { cause: string; input?: string; fix: string; failure: FailureClass } {
  // Match vLLM's and transformers' *request* wording only: every start logs its config
  // ("... with config: model=..., trust_remote_code=True, ..."), which names the setting without asking for it.
  if (
    /(?:consider setting|pass the argument|set) `?trust_remote_code=True|contains custom code which must be executed/i.test(
      log,
    )
  ) {
    return {
      cause: "vLLM exited requesting trust_remote_code=True",
      input: "model auto_map",
      fix: SEED_REDISCOVER,
      failure: "terminal",
    };
  }
  if (/VLLM_SSM_CONV_STATE_LAYOUT/.test(log)) {
    return {
      cause: "vLLM exited requesting VLLM_SSM_CONV_STATE_LAYOUT=DS",
      input: "model config (convolutional SSM)",
      fix: SEED_REDISCOVER,
      failure: "terminal",
    };
  }
  if (/Address already in use|EADDRINUSE/i.test(log)) {
    return {
      cause: "a planned port is already in use",
      input: "ports",
      fix: "Inspect planned ports with ss -ltnp; any existing listener blocks launch until ownership is resolved.",
      failure: "outwait",
    };
  }
  if (/unrecognized arguments|error: argument/i.test(log)) {
    return {
      cause: "vLLM rejected its command line",
      input: "runtime.extra_args",
      fix: "Remove or correct the flag vLLM names in runtime.extra_args.",
      failure: "terminal",
    };
  }
  const accelerator = /^.*(?:out of memory|CUDA error|HIP error).*$/im.exec(log);
  if (accelerator) {
    return {
      // The line itself: the log's tail may not hold it (stdout and stderr interleave, later lines follow).
      cause: `the engine failed on its accelerator (${accelerator[0].trim().slice(0, 300)})`,
      input: "gpu_ids / gpu-memory-utilization",
      fix: "Trace the failure to a device, model, memory, library, or transport input before creating another plan.",
      failure: "retry",
    };
  }
  return {
    cause: "the engine exited during startup",
    fix: "Use the recorded process or container identity and engine log; trace the failure to a device, model, memory, library, or transport input before creating another plan.",
    failure: "retry",
  };
}

/** Seed 000, "If vLLM exits requesting trust_remote_code=True or VLLM_SSM_CONV_STATE_LAYOUT=DS". */
const SEED_REDISCOVER =
  "Retain the failed attempt's evidence, rerun discovery from the corrected approved revision into fresh outputs, prepare a new deployment run, and validate engine 1 before updating the rest.";

function tail(text: string, lines: number): string {
  return text.trimEnd().split("\n").slice(-lines).join("\n");
}

export async function start(run: PreparedRun, opts: StartOptions): Promise<EngineHandle> {
  // Before anything runs: the plan on disk must be the checked one the state recorded.
  const { plan } = await readVerifiedPlan(run, "start");
  const handle = await opts.backend.ensureStarted(run, plan, opts.signal);
  try {
    await waitReady(run, plan.endpoint, handle, opts);
    return handle;
  } catch (err) {
    // A start that fails owns what it started: a retry begins from a fresh run, so the engine
    // must not be left holding the GPU and ports. Not on cancellation (controller shutdown):
    // the next controller adopts the engine by its launch token. Nor when the engine's node stopped
    // answering: the stop could not reach it either, and the retry resumes from this same run (the
    // launch token finds the engine once the node is back), so a node blip never kills a loading engine.
    // A backend that can keeps the failed engine, stopped, as evidence (seed 000: "use the recorded container ID").
    if (!opts.signal.aborted && opts.stopOnFailure !== false && !nodeFaultOf(err)) {
      const kept = await opts.backend.keepFailedStart?.(run, handle, opts.stopGraceMs).catch(() => null);
      if (!kept) await opts.backend.stop(handle, opts.stopGraceMs).catch(() => undefined);
      else if (err instanceof NarwhalError) throw withKept(err, kept);
    }
    throw err;
  }
}

/** The start's error, naming the kept engine (the operator's first place to look). */
function withKept(err: NarwhalError, kept: string): NarwhalError {
  return new PhaseError(err.engine ?? "?", err.step ?? "start", `${err.message}\n(${kept})`, {
    failure: err.failure,
    ...(err.input === undefined ? {} : { input: err.input }),
    ...(err.fix === undefined ? {} : { fix: err.fix }),
    cause: err,
  });
}

const ALIVE_EVERY_MS = 250;
const ALIVE_AT_MOST_MS = 5_000;

/**
 * How long after the last ask whether the engine still runs the next one is due, `waitedMs` into its start:
 * every ALIVE_EVERY_MS at first, then a tenth of the time waited so far, at most ALIVE_AT_MOST_MS apart. Over
 * ssh or to a Docker daemon each ask is a command or a request: a model that loads for ten minutes was asked
 * 2,400 times (an ssh client process each, on the controller); now about 150. An engine that dies while it
 * loads is still seen within a tenth of the time it had been loading (its port refuses meanwhile).
 */
export const aliveAskedEvery = (waitedMs: number): number =>
  Math.min(ALIVE_AT_MOST_MS, Math.max(ALIVE_EVERY_MS, waitedMs / 10));

async function waitReady(run: PreparedRun, endpoint: string, handle: EngineHandle, opts: StartOptions): Promise<void> {
  const began = Date.now();
  const deadline = began + opts.readySeconds * 1000;
  const firstSecond = began + 1000;
  const health = joinUrl(endpoint, "/health");
  opts.waits?.({ awaiting: "/health to answer 200", at: health, limitMs: opts.readySeconds * 1000 });
  // Whether the engine still runs is asked at most every aliveAskedEvery, and before a 200 counts: a
  // container's is an inspect, and 16 engines polled every 50 ms made the daemon answer 54 inspects per
  // engine in one cold converge (an engine that died is seen within that interval; its port refuses meanwhile).
  let aliveAsked = -Infinity;
  const ensureAlive = async (): Promise<void> => {
    aliveAsked = Date.now();
    if (await opts.backend.isAlive(handle)) return;
    const log = await opts.backend.startupLog(run, handle);
    const d = diagnoseStartupLog(log.text);
    // The log is evidence: a copy that failed is named, with where the whole log still is.
    const unread = log.problem ? `\n(${log.problem})` : "";
    throw new PhaseError(
      run.engine,
      "start",
      `${d.cause}; last log lines:\n${redactText(tail(log.text, 8), opts.secrets ?? [])}${unread}`,
      {
        failure: d.failure,
        input: d.input,
        fix: `${d.fix} The engine's log: ${log.where}.`,
      },
    );
  };
  for (;;) {
    if (Date.now() - aliveAsked >= aliveAskedEvery(Date.now() - began)) await ensureAlive();
    let answered = false;
    try {
      answered = (await httpRequest(health, { signal: opts.signal, timeoutMs: 5000 })).status === 200;
    } catch (err) {
      opts.signal.throwIfAborted();
      void err; // not listening yet
    }
    if (answered) {
      await ensureAlive(); // not a 200 from whatever holds the port after the engine died
      return;
    }
    if (Date.now() > deadline) {
      throw new PhaseError(
        run.engine,
        "start",
        `the engine did not answer ${health} within ${opts.readySeconds}s and was stopped`,
        {
          retryable: true,
          input: "NARWHAL_READY_SECONDS",
          fix: "Read engine.log in the run directory; raise NARWHAL_READY_SECONDS if the model needs longer to load.",
        },
      );
    }
    // Every 50 ms in the first second (a small model answers within it: the simulator in about 150 ms,
    // which a 250 ms step saw only at 250), then every 250 ms while a large one loads.
    await sleep(Date.now() < firstSecond ? 50 : 250, opts.signal);
  }
}
