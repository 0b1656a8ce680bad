// Bad desired input through the real CLI: `narwhal validate` exits 1 and prints
// every issue; `narwhal reconcile --once` on an invalid tree next to a running
// native fleet exits 1 and leaves the engines and the state file exactly as
// they were; a watch-mode controller fed invalid trees touches nothing and
// picks the valid tree up again when it returns.
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateDesired } from "../../src/desired/load.js";
import { validTree, type DesiredTree } from "../desired/fixtures.js";
import { CORPUS, expectationOf, writeCase, type CorpusCase } from "../desired-corpus/corpus.js";
import { allCaptured, engineMarks, startWatch, type EngineMark } from "../desired-corpus/controller-harness.js";
import { freshDir, readDesired, removeTree, writeDesired } from "../desired-corpus/tree.js";
import { engineProcesses, runCli, teardown, waitFor } from "./cli.js";
import { simFleet, type SimFleet } from "./sim-fleet.js";

const byName = (name: string): CorpusCase => {
  const c = CORPUS.find((x) => x.name === name);
  if (!c) throw new Error(`no corpus case ${name}`);
  return c;
};
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Run `work` over `items`, at most `n` at a time. */
async function pool<T>(items: T[], n: number, work: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: n }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
    }),
  );
}

/**
 * The printed line `FILE PATH: MESSAGE [rule]` of an expected issue, as a regex source. A message
 * anchored in the corpus (^...$: the whole message) is anchored between ": " and " [" here.
 */
function issueLine(want: { file: string; path: string; message: RegExp }): string {
  const src = want.message.source;
  const [whole, end] = [src.startsWith("^"), src.endsWith("$") && !src.endsWith("\\$")];
  const body = src.slice(whole ? 1 : 0, end ? -1 : undefined);
  return `${escape(want.file)} ${escape(want.path)}: ${whole ? "" : ".*"}${body}${end ? " \\[" : ""}`;
}

describe("narwhal validate on the corpus", () => {
  it("exits 1 and prints every issue, with file and path, for one tree of every category", async () => {
    const seen = new Set<string>();
    const sample = CORPUS.filter((c) => !seen.has(c.category) && seen.add(c.category));
    await pool(sample, 3, async (c) => {
      const dir = await freshDir();
      const tree = await writeCase(c, dir, validTree());
      const want = expectationOf(c, tree);
      const { issues } = await validateDesired(dir);
      const r = await runCli(["validate", "--desired", dir]);
      expect(r.code, c.name).toBe(1);
      expect(r.stderr, c.name).toContain(`is invalid (${issues.length} errors)`);
      for (const i of issues) expect(r.stderr, c.name).toContain(`  ${i.file} ${i.path}: ${i.message} [${i.rule}]`);
      expect(r.stderr, c.name).toMatch(new RegExp(`  ${issueLine(want)}`));
      await removeTree(dir);
    });
    console.log(`validate CLI: ${sample.length} corpus trees (one per category), each exit 1 with every issue printed`);
  }, 150_000);
});

describe("invalid desired input next to a running native fleet", () => {
  let fleet: SimFleet;
  let base: DesiredTree;
  let running: Record<string, EngineMark>;

  const untouched = async () => {
    const now = await engineMarks(fleet.stateDir);
    for (const [name, m] of Object.entries(running)) {
      expect(now[name], name).toEqual(m);
    }
    expect((await engineProcesses(fleet.stateDir)).map((p) => p.pid).sort()).toEqual(
      Object.values(running)
        .map((m) => m.pid)
        .sort(),
    );
  };

  beforeAll(async () => {
    fleet = await simFleet();
    const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
    expect(r.code, r.stderr).toBe(0);
    base = await readDesired(fleet.dir);
    running = (await allCaptured(fleet.stateDir))!;
    expect(running).toBeDefined();
  });
  afterAll(async () => {
    await teardown(fleet.stateDir);
  });

  const ONCE = [
    "fleet.json cut in half",
    "duplicate NIXL side-channel port on a host",
    "engine-launch.json symlinked through ../",
    "extra_args overrides a launcher-managed flag: --port=1",
    "newline in a runtime.environment value",
    "__proto__ in a launch record",
  ];

  it("reconcile --once exits 1 naming the file and path, and the engines and state file stay as they were", async () => {
    const stateFile = path.join(fleet.stateDir, "narwhal.json");
    const before = await fs.readFile(stateFile);
    for (const name of ONCE) {
      const c = byName(name);
      const tree = await writeCase(c, fleet.dir, base);
      const want = expectationOf(c, tree);
      const r = await runCli(["reconcile", "--once", "--desired", fleet.dir, "--state", fleet.stateDir]);
      expect(r.code, `${name}\n${r.stderr}`).toBe(1);
      expect(r.stderr, name).toMatch(new RegExp(`  ${issueLine(want)}`));
      expect(r.stderr, name).toMatch(/nothing was started or stopped/);
      expect((await fs.readFile(stateFile)).equals(before), `${name}: state file unchanged`).toBe(true);
      await untouched();
    }
    await writeDesired(fleet.dir, base);
  }, 60_000);

  const WATCH = [
    "engine-launch.json cut inside a string",
    "two engines on one host share a GPU",
    "fleet.json symlinked to an absolute path outside the tree",
    "fleet.json is a directory",
    "newline in the API key (\\n escape)",
    "extra_args overrides a launcher-managed flag: --kv-transfer-config.kv_role (dotted JSON key)",
  ];

  it("a watch-mode controller keeps the running engines through invalid trees and applies the valid one when it returns", async () => {
    // Started on an invalid tree: it must not act on the engines it finds in the state file.
    const first = byName(WATCH[0]!);
    await writeCase(first, fleet.dir, base);
    const controller = startWatch(fleet.dir, fleet.stateDir);
    try {
      await controller.waitLog(new RegExp(escape(expectationOf(first, base).path)), 0);
      for (const name of WATCH.slice(1)) {
        const c = byName(name);
        const at = controller.mark();
        const tree = await writeCase(c, fleet.dir, base);
        const want = expectationOf(c, tree);
        await controller.waitLog(new RegExp(issueLine(want)), at);
        await untouched();
      }
      expect(controller.applied(0)).toBe(0);
      const at = controller.mark();
      await writeDesired(fleet.dir, base);
      await controller.waitLog(/desired state applied \(2 engines\)/, at);
      // The valid tree is the running one: applied, converged, and still nothing restarted.
      await waitFor("both captured", () => allCaptured(fleet.stateDir), 20_000);
      await new Promise((r) => setTimeout(r, 1500));
      await untouched();
      expect(controller.proc.exitCode).toBeNull();
    } finally {
      expect(await controller.stop()).toBe(0);
    }
    await untouched();
  }, 90_000);
});
