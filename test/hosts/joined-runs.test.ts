// Inspection's commands join the same command running on the same node (src/hosts/joined-runs.ts): real
// processes on LocalHosts. A shell that prints its own pid tells one run from several; the model
// manifest's runs are counted by a host that hands every command to a LocalHost and notes how each ended.
import fs from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CancelledError } from "../../src/errors.js";
import { JoinedRuns } from "../../src/hosts/joined-runs.js";
import { LocalHost } from "../../src/hosts/local.js";
import type { HostAccess, RunOptions } from "../../src/hosts/types.js";
import { modelManifest, type HashProgress } from "../../src/phases/host/model-manifest.js";

const PATH = "/usr/local/bin:/usr/bin:/bin";
const local = (node: string) => new LocalHost(node, { PATH });
/** A shell that says its pid on stdout (after `pause` seconds), so the answers tell how many ran. */
const pidOf = (pause = 0.3, before = "") => ["/bin/sh", "-c", `${before}sleep ${pause}; echo $$`];

/**
 * A LocalHost named `node` whose runs of `argv[0]` named `tool` (the manifest script: "-") are noted: "ok" once
 * one exits, "cancelled" once one is stopped.
 */
function notedHost(node: string, tool: string): { host: HostAccess; runs: string[] } {
  const host = local(node);
  const runs: string[] = [];
  const noted = new JoinedRuns().access(host); // every method the host's own: run() replaced below
  noted.run = (argv: string[], opts?: RunOptions) => {
    const ran = host.run(argv, opts);
    if (argv[0] === tool || (tool === "-" && argv.includes("-")))
      ran.then(
        () => runs.push("ok"),
        (err: unknown) => runs.push(err instanceof CancelledError ? "cancelled" : "failed"),
      );
    return ran;
  };
  return { host: noted, runs };
}

let root: string;
let model: string;
beforeEach(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), "narwhal-joined-"));
  model = path.join(root, "model");
  await fs.mkdir(model);
  await fs.writeFile(path.join(model, "config.json"), '{"model_type":"llama"}');
  // Sparse: a run hashes it for a while (zeros, no disk), long enough to be joined and cancelled.
  const weights = await fs.open(path.join(model, "model.safetensors"), "w");
  await weights.truncate(512 * 2 ** 20);
  await weights.close();
});
afterEach(() => fs.rm(root, { recursive: true, force: true }));

describe("inspection's commands on a node", () => {
  it("run once for everyone who asks while the same command runs there, and again once it ended", async () => {
    const host = new JoinedRuns().access(local("node-a"));
    const answers = await Promise.all([1, 2, 3].map(() => host.run(pidOf())));
    expect(new Set(answers.map((r) => r.stdout)).size).toBe(1);
    expect(answers[0]).toMatchObject({ code: 0, timedOut: false });
    const later = await host.run(pidOf());
    expect(later.stdout).not.toBe(answers[0]!.stdout);
  });

  it("read the listener table once for everyone who asks at once (ss, through run())", async () => {
    const { host, runs } = notedHost("node-a", "ss");
    const joined = new JoinedRuns().access(host);
    const [l1, l2] = await Promise.all([joined.listeners(), joined.listeners()]);
    expect(l2).toEqual(l1);
    expect(runs).toEqual(["ok"]);
  });

  it("run apart on other nodes, and for another argv, stdin, environment, directory or deadline", async () => {
    const runs = new JoinedRuns();
    const a = runs.access(local("node-a"));
    const b = runs.access(local("node-b"));
    const answers = await Promise.all([
      a.run(pidOf()),
      a.run(pidOf()),
      b.run(pidOf()),
      a.run(pidOf(0.31)),
      a.run(pidOf(), { stdin: "x" }),
      a.run(pidOf(), { env: { X: "1" } }),
      a.run(pidOf(), { cwd: "/" }),
      a.run(pidOf(), { timeoutMs: 60_000 }),
    ]);
    const pids = answers.map((r) => r.stdout);
    expect(pids[1]).toBe(pids[0]);
    expect(new Set(pids).size).toBe(7);
  });

  it("tell a late joiner the last line of stderr that came before it, then the rest", async () => {
    const host = new JoinedRuns().access(local("node-a"));
    const first: string[] = [];
    const late: string[] = [];
    let said!: () => void;
    const saidB = new Promise<void>((resolve) => (said = resolve));
    const argv = ["/bin/sh", "-c", "echo a >&2; echo b >&2; sleep 0.3; echo c >&2; echo $$"];
    const one = host.run(argv, {
      onStderr: (c) => {
        first.push(c);
        if (first.join("").includes("b\n")) said();
      },
    });
    await saidB;
    const two = host.run(argv, { onStderr: (c) => late.push(c) });
    const [r1, r2] = await Promise.all([one, two]);
    expect(r2.stdout).toBe(r1.stdout);
    expect(late.join("")).toBe("b\nc\n");
    expect(first.join("")).toBe("a\nb\nc\n");
    expect(r2.stderr).toBe("a\nb\nc\n");
  });

  it("go on for the others when one who asked is cancelled, and stop when the last one is", async () => {
    const host = new JoinedRuns().access(local("node-a"));
    const leaving = new AbortController();
    const leftRun = host.run(pidOf(), { signal: leaving.signal });
    const stays = host.run(pidOf());
    leaving.abort();
    await expect(leftRun).rejects.toBeInstanceOf(CancelledError);
    expect((await stays).code).toBe(0);

    // Everyone leaves: the command is stopped, and the last one is told once it has ended.
    const pidFile = path.join(root, "pid");
    const argv = ["/bin/sh", "-c", `echo $$ > ${pidFile}.tmp && mv ${pidFile}.tmp ${pidFile} && exec sleep 30`];
    const all = [new AbortController(), new AbortController()];
    const both = all.map((c) => host.run(argv, { signal: c.signal }));
    let pid = "";
    while (!(pid = await fs.readFile(pidFile, "utf8").catch(() => ""))) await new Promise((r) => setTimeout(r, 5));
    for (const c of all) c.abort();
    for (const p of both) await expect(p).rejects.toBeInstanceOf(CancelledError);
    expect(() => process.kill(Number(pid), 0)).toThrow(/ESRCH/);
  });

  it("refuse a request whose signal is already aborted, running nothing", async () => {
    const host = new JoinedRuns().access(local("node-a"));
    const done = new AbortController();
    done.abort();
    const marker = path.join(root, "ran");
    await expect(host.run(["touch", marker], { signal: done.signal })).rejects.toBeInstanceOf(CancelledError);
    expect(await fs.stat(marker).catch(() => null)).toBeNull();
  });
});

describe("the model manifest of engines of one node and checkpoint inspected at once", () => {
  it("is computed once, each told its progress, each given a manifest of its own", async () => {
    const { host, runs } = notedHost("node-a", "-");
    const joined = new JoinedRuns().access(host);
    const told: HashProgress[][] = [[], [], [], []];
    const cacheDir = path.join(root, "cache");
    const signal = new AbortController().signal;
    const results = await Promise.all(
      told.map((mine) => modelManifest(joined, model, { signal, cacheDir, onProgress: (p) => mine.push(p) })),
    );
    expect(runs).toEqual(["ok"]);
    for (const r of results) {
      expect(r.manifest.files.map((f) => f.path)).toEqual(["config.json", "model.safetensors"]);
      expect(r.manifest.tree_sha256).toBe(results[0]!.manifest.tree_sha256);
      expect(r).toMatchObject({ hashed: 2, cached: 0 });
    }
    expect(new Set(results.map((r) => r.manifest)).size).toBe(4);
    for (const mine of told) expect(mine.length).toBeGreaterThan(0);
    // The next inspection runs it again, against the node's digest cache.
    expect(await modelManifest(joined, model, { signal, cacheDir })).toMatchObject({ hashed: 0, cached: 2 });
    expect(runs).toEqual(["ok", "ok"]);
  });
});
