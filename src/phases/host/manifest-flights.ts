// One model manifest at a time per node and model directory. Engines of one node that share a checkpoint
// are inspected together (up to NARWHAL_NODE_CONCURRENCY at once), and each ran its own model_manifest.py:
// on a node's first inspection every one of them read the whole checkpoint (four engines of a 140 GB
// model, 560 GB off the node's disk at once), and on later ones each paid a Python start to stat the same
// files. An inspection that asks while another engine's manifest of the same directory on the same node
// is being computed joins it: the answer is the node's file tree as read over a span that overlaps its own
// request, as its own run begun at that moment would have read it. Nothing is kept once a run settles:
// the next inspection runs the script again (the node's digest cache makes that a stat of each file).
//
// Each joiner keeps its own cancellation: one that is cancelled leaves (its inspection gets CancelledError
// at once) and the run goes on for the others; the run is stopped when the last one has left. Each joiner
// is told the run's progress, the last report first.
import { CancelledError } from "../../errors.js";
import type { HostAccess } from "../../hosts/types.js";
import { modelManifest, type HashProgress, type ManifestOptions, type ManifestRun } from "./model-manifest.js";

interface Joiner {
  onProgress: ((p: HashProgress) => void) | undefined;
  resolve(run: ManifestRun): void;
  reject(err: unknown): void;
}

interface Flight {
  joiners: Set<Joiner>;
  abort: AbortController;
  last: HashProgress | undefined;
}

/** The manifests being computed, one per node, model directory and cache file; a controller holds one. */
export class ManifestFlights {
  private readonly flights = new Map<string, Flight>();

  /** modelManifest(host, modelDir, opts), joining the run of the same node, directory and cache in flight. */
  run(host: HostAccess, modelDir: string, opts: ManifestOptions): Promise<ManifestRun> {
    const what = `the model manifest of ${modelDir} on node ${host.node}`;
    if (opts.signal.aborted) return Promise.reject(new CancelledError(what));
    const key = JSON.stringify([host.node, modelDir, opts.cacheDir ?? null]);
    const flight = this.flights.get(key) ?? this.start(key, host, modelDir, opts);
    return new Promise<ManifestRun>((resolve, reject) => {
      const leave = () => {
        opts.signal.removeEventListener("abort", onAbort);
        flight.joiners.delete(joiner);
      };
      const joiner: Joiner = {
        onProgress: opts.onProgress,
        // Each inspection gets a manifest of its own: one engine's record never shares an object with another's.
        resolve: (run) => {
          leave();
          resolve(structuredClone(run));
        },
        reject: (err) => {
          leave();
          reject(err);
        },
      };
      const onAbort = () => {
        leave();
        reject(new CancelledError(what));
        if (flight.joiners.size > 0) return;
        // The last one left: stop the run, and let the next request start a run of its own.
        if (this.flights.get(key) === flight) this.flights.delete(key);
        flight.abort.abort();
      };
      opts.signal.addEventListener("abort", onAbort, { once: true });
      flight.joiners.add(joiner);
      if (flight.last) opts.onProgress?.(flight.last);
    });
  }

  private start(key: string, host: HostAccess, modelDir: string, opts: ManifestOptions): Flight {
    const flight: Flight = { joiners: new Set(), abort: new AbortController(), last: undefined };
    this.flights.set(key, flight);
    const onProgress = (p: HashProgress) => {
      flight.last = p;
      for (const j of [...flight.joiners]) j.onProgress?.(p);
    };
    const settle = (tell: (j: Joiner) => void) => {
      if (this.flights.get(key) === flight) this.flights.delete(key);
      for (const j of [...flight.joiners]) tell(j);
    };
    modelManifest(host, modelDir, {
      signal: flight.abort.signal,
      onProgress,
      ...(opts.cacheDir === undefined ? {} : { cacheDir: opts.cacheDir }),
      ...(opts.now ? { now: opts.now } : {}),
    }).then(
      (run) => settle((j) => j.resolve(run)),
      (err: unknown) => settle((j) => j.reject(err)),
    );
    return flight;
  }
}
