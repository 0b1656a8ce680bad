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
// run goes on for the others; when the last one leaves, the run is stopped, and that last one's
// CancelledError comes once the command has ended (as the host's own run() rejects only after it killed
// the command), so a closing controller never leaves an inspection's command running on a node. Each is
// told the run's stderr as it arrives (model_manifest.py's progress), the last line before it joined first.
// A joiner shares the run's deadline, counted from the run's start, not from its own request.
import { CancelledError } from "../errors.js";
import { listenersVia } from "./local.js";
import type { HostAccess, RunOptions, RunResult } from "./types.js";

type Outcome = { ok: RunResult } | { err: unknown };

interface Joiner {
  onStderr: ((chunk: string) => void) | undefined;
  settle(result: Outcome): void;
}

interface Flight {
  joiners: Set<Joiner>;
  abort: AbortController;
  /** The last whole line of stderr and what followed it: what a late joiner is told first. */
  lastLine: string;
  /** The last joiner, cancelled: told once the stopped command has ended. */
  draining: (() => void) | undefined;
}

/** What makes two runs the same command: argv and every option the run is given (signal and stderr listener aside). */
function commandKey(argv: string[], command: Omit<RunOptions, "signal" | "onStderr">): string {
  const fields = Object.entries(command)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => [k, Buffer.isBuffer(v) ? `b${v.toString("base64")}` : typeof v === "string" ? `s${v}` : v])
    .sort(([a], [b]) => (a! < b! ? -1 : 1));
  return JSON.stringify([argv, fields]);
}

/** The runs in flight of one controller's inspections, per host access (a node's changed ssh target is another). */
export class JoinedRuns {
  private readonly flights = new WeakMap<HostAccess, Map<string, Flight>>();

  /** `host`, whose run() joins the same command running through it; every other method is the host's own. */
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
      scanLeaders: (names) => host.scanLeaders(names),
      ensureFiles: (files) => host.ensureFiles(files),
      close: () => host.close(),
    };
    return joined;
  }

  private run(host: HostAccess, argv: string[], opts: RunOptions): Promise<RunResult> {
    const { signal, onStderr, ...command } = opts;
    const what = `${argv.join(" ")} on node ${host.node}`;
    if (signal?.aborted) return Promise.reject(new CancelledError(what));
    let flights = this.flights.get(host);
    if (!flights) this.flights.set(host, (flights = new Map()));
    const key = commandKey(argv, command);
    const flight = flights.get(key) ?? this.start(flights, key, host, argv, command);
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
        if (flight.joiners.size > 0) return reject(new CancelledError(what));
        // The last one left: stop the run (the next request starts one of its own), and say so once it ended.
        if (flights.get(key) === flight) flights.delete(key);
        flight.draining = () => reject(new CancelledError(what));
        flight.abort.abort();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      flight.joiners.add(joiner);
      if (flight.lastLine) onStderr?.(flight.lastLine);
    });
  }

  private start(
    flights: Map<string, Flight>,
    key: string,
    host: HostAccess,
    argv: string[],
    command: Omit<RunOptions, "signal" | "onStderr">,
  ): Flight {
    const flight: Flight = { joiners: new Set(), abort: new AbortController(), lastLine: "", draining: undefined };
    flights.set(key, flight);
    const onStderr = (chunk: string) => {
      const said = flight.lastLine + chunk;
      // From the start of the last whole line (a line cut off at the chunk's end is kept after it).
      const end = said.endsWith("\n") ? said.length - 1 : said.lastIndexOf("\n");
      flight.lastLine = end < 0 ? said : said.slice(said.lastIndexOf("\n", end - 1) + 1);
      for (const j of [...flight.joiners]) j.onStderr?.(chunk);
    };
    const settle = (result: Outcome) => {
      if (flights.get(key) === flight) flights.delete(key);
      flight.draining?.();
      for (const j of [...flight.joiners]) j.settle(result);
    };
    host.run(argv, { ...command, signal: flight.abort.signal, onStderr }).then(
      (ok) => settle({ ok }),
      (err: unknown) => settle({ err }),
    );
    return flight;
  }
}
