// Inspection's commands, one run at a time per node and command. Engines of one node are inspected
// together (up to NARWHAL_NODE_CONCURRENCY at once) and each ran the same read-only commands there:
// nvidia-smi, the PCI walk, ip, ss, and model_manifest.py, which on a node's first inspection read the
// whole checkpoint once per engine (four engines of a 140 GB model, 560 GB off the node's disk at once).
// Through JoinedRuns.access(host) a command asked for while the same command (argv, stdin, environment,
// directory and deadline) is running on the same node joins that run: its answer is the node as read
// over a span that overlaps the request, as its own run begun at that moment would have read it. Only
// for commands that change nothing on the node (inspect.ts: it only reads, runs read-only tools, and
// binds then closes ports). Nothing is kept once a run ends: the next request runs the command again.
//
// Each joiner keeps its own cancellation: one that is cancelled leaves (CancelledError at once) and the
// run goes on for the others; the run is stopped when the last one has left. Each is told the run's
// stderr as it arrives (model_manifest.py's progress), what came before it joined first.
import { CancelledError } from "../errors.js";
import { listenersVia } from "./local.js";
import type { HostAccess, RunOptions, RunResult } from "./types.js";

interface Joiner {
  onStderr: ((chunk: string) => void) | undefined;
  settle(result: { ok: RunResult } | { err: unknown }): void;
}

interface Flight {
  joiners: Set<Joiner>;
  abort: AbortController;
  stderr: string[];
}

/** What makes two runs the same command: everything of the request but its signal and its stderr listener. */
function commandKey(node: string, argv: string[], opts: RunOptions): string {
  const { stdin, env, timeoutMs, cwd } = opts;
  const input = stdin === undefined ? null : typeof stdin === "string" ? `s${stdin}` : `b${stdin.toString("base64")}`;
  return JSON.stringify([node, argv, input, env ?? null, timeoutMs ?? null, cwd ?? null]);
}

/** The runs in flight of one controller's inspections, on every node. */
export class JoinedRuns {
  private readonly flights = new Map<string, Flight>();

  /** `host`, whose run() joins the same command running on its node; every other method is the host's own. */
  access(host: HostAccess): HostAccess {
    const joined: HostAccess = {
      node: host.node,
      kind: host.kind,
      helperPython: host.helperPython,
      run: (argv, opts = {}) => this.run(host, argv, opts),
      // ss through run(), as both host kinds list listeners (local.ts listenersVia), so it joins too.
      listeners: () => listenersVia(joined),
      readFile: (p, opts) => host.readFile(p, opts),
      stat: (p) => host.stat(p),
      readDir: (p) => host.readDir(p),
      readLink: (p) => host.readLink(p),
      writeFile: (p, data, mode) => host.writeFile(p, data, mode),
      spawnDetached: (argv, opts) => host.spawnDetached(argv, opts),
      listProcesses: () => host.listProcesses(),
      processEnvToken: (pid, name) => host.processEnvToken(pid, name),
      processEnvs: (pids, names) => host.processEnvs(pids, names),
      bootId: () => host.bootId(),
      close: () => host.close(),
    };
    return joined;
  }

  private run(host: HostAccess, argv: string[], opts: RunOptions): Promise<RunResult> {
    const { signal, onStderr } = opts;
    const what = `${argv.join(" ")} on node ${host.node}`;
    if (signal?.aborted) return Promise.reject(new CancelledError(what));
    const key = commandKey(host.node, argv, opts);
    const flight = this.flights.get(key) ?? this.start(key, host, argv, opts);
    return new Promise<RunResult>((resolve, reject) => {
      const leave = () => {
        signal?.removeEventListener("abort", onAbort);
        flight.joiners.delete(joiner);
      };
      const joiner: Joiner = {
        onStderr,
        settle: (result) => {
          leave();
          if ("ok" in result) resolve({ ...result.ok });
          else reject(result.err);
        },
      };
      const onAbort = () => {
        leave();
        reject(new CancelledError(what));
        if (flight.joiners.size > 0) return;
        // The last one left: stop the run, and let the next request start one of its own.
        if (this.flights.get(key) === flight) this.flights.delete(key);
        flight.abort.abort();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      flight.joiners.add(joiner);
      for (const chunk of flight.stderr) onStderr?.(chunk);
    });
  }

  private start(key: string, host: HostAccess, argv: string[], opts: RunOptions): Flight {
    const flight: Flight = { joiners: new Set(), abort: new AbortController(), stderr: [] };
    this.flights.set(key, flight);
    const { signal: _own, onStderr: _theirs, ...command } = opts;
    const onStderr = (chunk: string) => {
      flight.stderr.push(chunk);
      for (const j of [...flight.joiners]) j.onStderr?.(chunk);
    };
    const settle = (result: { ok: RunResult } | { err: unknown }) => {
      if (this.flights.get(key) === flight) this.flights.delete(key);
      for (const j of [...flight.joiners]) j.settle(result);
    };
    host.run(argv, { ...command, signal: flight.abort.signal, onStderr }).then(
      (ok) => settle({ ok }),
      (err: unknown) => settle({ err }),
    );
    return flight;
  }
}
