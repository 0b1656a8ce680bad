// Engines of one node and checkpoint share one model_manifest.py run at a time (manifest-flights.ts):
// real runs of the script on a LocalHost, counted by a host that hands every command to the LocalHost
// and notes how each helper run ended.
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CancelledError } from "../../src/errors.js";
import { LocalHost } from "../../src/hosts/local.js";
import type { HostAccess, RunOptions } from "../../src/hosts/types.js";
import { ManifestFlights } from "../../src/phases/host/manifest-flights.js";
import type { HashProgress, ManifestRun } from "../../src/phases/host/model-manifest.js";

const PATH = "/usr/local/bin:/usr/bin:/bin";

/** A LocalHost named `node` whose manifest runs are noted: "ok" once one exits, "cancelled" once one is stopped. */
function notedHost(node: string): { host: HostAccess; runs: string[] } {
  const local = new LocalHost(node, { PATH });
  const runs: string[] = [];
  const host = Object.create(local) as HostAccess;
  host.run = (argv: string[], opts?: RunOptions) => {
    const manifest = argv.includes("-") && typeof opts?.stdin !== "undefined";
    const ran = local.run(argv, opts);
    if (manifest)
      ran.then(
        () => runs.push("ok"),
        (err: unknown) => runs.push(err instanceof CancelledError ? "cancelled" : "failed"),
      );
    return ran;
  };
  return { host, runs };
}

let root: string;
let model: string;
beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "narwhal-flights-"));
  model = path.join(root, "model");
  await fs.mkdir(model);
  await fs.writeFile(path.join(model, "config.json"), '{"model_type":"llama"}');
  // Sparse: a run hashes it for a while (zeros, no disk), long enough to be joined and cancelled.
  const weights = await fs.open(path.join(model, "model.safetensors"), "w");
  await weights.truncate(512 * 2 ** 20);
  await weights.close();
});
afterEach(() => fs.rm(root, { recursive: true, force: true }));

const paths = (r: ManifestRun) => r.manifest.files.map((f) => f.path);

describe("model manifests in flight", () => {
  it("are run once for the engines of one node and checkpoint that ask at once, each told the progress", async () => {
    const { host, runs } = notedHost("node-a");
    const flights = new ManifestFlights();
    const told: HashProgress[][] = [[], [], [], []];
    const cacheDir = path.join(root, "cache");
    const results = await Promise.all(
      told.map((mine) =>
        flights.run(host, model, { signal: new AbortController().signal, cacheDir, onProgress: (p) => mine.push(p) }),
      ),
    );
    expect(runs).toEqual(["ok"]);
    for (const r of results) {
      expect(paths(r)).toEqual(["config.json", "model.safetensors"]);
      expect(r).toEqual(results[0]);
      expect(r.manifest.node).toBe("node-a");
    }
    // Each inspection holds a manifest object of its own.
    expect(new Set(results.map((r) => r.manifest)).size).toBe(4);
    for (const mine of told) expect(mine.length).toBeGreaterThan(0);

    // Nothing is kept once the run settled: the next request runs the script again (from the node's cache).
    const again = await flights.run(host, model, { signal: new AbortController().signal, cacheDir });
    expect(runs).toEqual(["ok", "ok"]);
    expect(again).toMatchObject({ hashed: 0, cached: 2 });
  });

  it("are run once per node, and once per cache directory", async () => {
    const a = notedHost("node-a");
    const b = notedHost("node-b");
    const flights = new ManifestFlights();
    const signal = new AbortController().signal;
    const [ra, rb, rc] = await Promise.all([
      flights.run(a.host, model, { signal }),
      flights.run(b.host, model, { signal }),
      flights.run(a.host, model, { signal, cacheDir: path.join(root, "cache") }),
    ]);
    expect([a.runs, b.runs]).toEqual([["ok", "ok"], ["ok"]]);
    expect([ra!.manifest.node, rb!.manifest.node, rc!.manifest.node]).toEqual(["node-a", "node-b", "node-a"]);
    expect(rb!.manifest.tree_sha256).toBe(ra!.manifest.tree_sha256);
  });

  it("go on for the others when one who asked is cancelled, and stop when the last one is", async () => {
    const { host, runs } = notedHost("node-a");
    const flights = new ManifestFlights();
    const leaving = new AbortController();
    const staying = new AbortController();
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const left = flights.run(host, model, { signal: leaving.signal, onProgress: () => started() });
    const stays = flights.run(host, model, { signal: staying.signal });
    await running;
    leaving.abort();
    await expect(left).rejects.toBeInstanceOf(CancelledError);
    expect(paths(await stays)).toEqual(["config.json", "model.safetensors"]);
    expect(runs).toEqual(["ok"]);

    // Everyone leaves: the script is stopped, and a later request runs one of its own to the end.
    const first = new AbortController();
    const second = new AbortController();
    let again!: () => void;
    const runningAgain = new Promise<void>((resolve) => (again = resolve));
    const both = [first, second].map((c) => flights.run(host, model, { signal: c.signal, onProgress: () => again() }));
    await runningAgain;
    first.abort();
    second.abort();
    for (const p of both) await expect(p).rejects.toBeInstanceOf(CancelledError);
    const later = await flights.run(host, model, { signal: new AbortController().signal });
    expect(paths(later)).toEqual(["config.json", "model.safetensors"]);
    expect(runs).toEqual(["ok", "cancelled", "ok"]);
  });

  it("refuse a request whose signal is already aborted, running nothing", async () => {
    const { host, runs } = notedHost("node-a");
    const done = new AbortController();
    done.abort();
    await expect(new ManifestFlights().run(host, model, { signal: done.signal })).rejects.toBeInstanceOf(
      CancelledError,
    );
    expect(runs).toEqual([]);
  });
});
