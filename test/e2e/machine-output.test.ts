// Machine output through the real CLI against a simulated native fleet: every command's
// --format json (and yaml where offered) is one document whose first fields are apiVersion and
// kind; a failing command in a machine format prints an Error document on stderr, field by field;
// and a wrong command line is refused (exit 1, naming the option) before any file is read or written.
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { runCli, teardown, type CliResult } from "./cli.js";
import { simFleet, type SimFleet } from "./sim-fleet.js";

type Doc = Record<string, any>;

/** stdout (or stderr) as a document of `kind`: apiVersion and kind are its first two fields. */
function docOf(r: CliResult, kind: string, format: "json" | "yaml" = "json", stream: "stdout" | "stderr" = "stdout") {
  const text = r[stream];
  const doc = (format === "json" ? JSON.parse(text) : parseYaml(text)) as Doc;
  expect(Object.keys(doc).slice(0, 2), text).toEqual(["apiVersion", "kind"]);
  expect(doc.apiVersion).toBe("narwhal/v1");
  expect(doc.kind).toBe(kind);
  return doc;
}

/** Every path under `dir` with its size and mtime (absent directory: null). */
async function listing(dir: string): Promise<Record<string, string> | null> {
  const names = await fs.readdir(dir, { recursive: true }).catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT") return null;
    throw e;
  });
  if (!names) return null;
  const out: Record<string, string> = {};
  for (const n of names.map(String).sort()) {
    const st = await fs.lstat(path.join(dir, n));
    out[n] = `${st.size} ${st.mtimeMs}`;
  }
  return out;
}

describe("machine output: apiVersion and kind on every command", () => {
  let fleet: SimFleet;
  let root: string;
  const dirs = () => ["--desired", fleet.dir, "--state", fleet.stateDir];

  beforeAll(async () => {
    fleet = await simFleet();
    root = path.dirname(fleet.dir);
  });
  afterAll(async () => {
    await teardown(fleet.stateDir);
  });

  it("reconcile --once, validate, status, groups, plan, apply and down print their kinds in json and yaml", async () => {
    const once = await runCli(["reconcile", "--once", ...dirs(), "--format", "json"]);
    expect(once.code, once.stderr).toBe(0);
    const converged = docOf(once, "ReconcileResult");
    expect(converged.converged).toBe(true);
    expect(converged.engines.map((e: Doc) => e.phase)).toEqual(["captured", "captured"]);

    for (const format of ["json", "yaml"] as const) {
      const valid = await runCli(["validate", "--desired", fleet.dir, "--format", format]);
      expect(valid.code, valid.stderr).toBe(0);
      expect(docOf(valid, "ValidationResult", format)).toMatchObject({ valid: true, issues: [] });

      const all = await runCli(["status", ...dirs(), "--format", format]);
      expect(all.code, all.stderr).toBe(0);
      expect(docOf(all, "Status", format).engines).toHaveLength(2);

      const one = await runCli(["status", "engine-1", ...dirs(), "--format", format]);
      expect(one.code, one.stderr).toBe(0);
      expect(docOf(one, "EngineStatus", format).engines.map((e: Doc) => e.engine)).toEqual(["engine-1"]);

      const groups = await runCli(["groups", "--state", fleet.stateDir, "--format", format]);
      expect(groups.code, groups.stderr).toBe(0);
      const items = docOf(groups, "Groups", format).items as Doc[];
      expect(items.length).toBeGreaterThan(0);
      expect(items[0]).toHaveProperty("signature");

      const plan = await runCli(["plan", ...dirs(), "--format", format]);
      expect(plan.code, plan.stderr).toBe(0);
      expect(docOf(plan, "Plan", format)).toMatchObject({ state_dir: fleet.stateDir, plan: { changes: false } });
    }

    const file = path.join(root, "plan.json");
    expect((await runCli(["plan", ...dirs(), "--out", file])).code).toBe(0);
    // The saved plan is the Plan document; apply reads it back.
    expect(Object.keys(JSON.parse(await fs.readFile(file, "utf8")) as Doc).slice(0, 2)).toEqual(["apiVersion", "kind"]);
    const applied = await runCli(["apply", file, "--format", "yaml"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(docOf(applied, "ApplyResult", "yaml").converged).toBe(true);

    const down = await runCli(["down", ...dirs(), "--format", "json"]);
    expect(down.code, down.stderr).toBe(0);
    const stopped = docOf(down, "DownResult");
    expect(stopped.stopped.sort()).toEqual(["engine-1", "engine-2"]);
    expect(stopped.failed).toEqual([]);
  });

  it("engine actions print an EngineActionResult, keeping their schema field", async () => {
    const out = path.join(root, "runs", "engine-1");
    const r = await runCli([
      "engine",
      "prepare",
      "--desired",
      fleet.dir,
      "--engine",
      "engine-1",
      "--out",
      out,
      "--format",
      "json",
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(docOf(r, "EngineActionResult")).toMatchObject({
      schema: "narwhal.engine-result/v1",
      action: "prepare",
      engine: "engine-1",
      run: out,
    });
  });

  it("errors in json and yaml are an Error document on stderr with the fields of the text error", async () => {
    const bad = path.join(root, "bad-desired");
    await fs.cp(fleet.dir, bad, { recursive: true });
    await fs.writeFile(path.join(bad, "fleet.json"), "{ not json");
    const state = path.join(root, "bad-state");

    const text = await runCli(["reconcile", "--once", "--desired", bad, "--state", state]);
    expect(text.code).toBe(1);
    for (const format of ["json", "yaml"] as const) {
      for (const args of [["reconcile", "--once"], ["plan"]]) {
        const r = await runCli([...args, "--desired", bad, "--state", state, "--format", format]);
        expect(r.code, args.join(" ")).toBe(1);
        expect(r.stdout, args.join(" ")).toBe("");
        const e = docOf(r, "Error", format, "stderr");
        expect(e, args.join(" ")).toMatchObject({
          name: "DesiredStateError",
          engine: null,
          node: null,
          step: "validate",
          input: null,
          retryable: false,
          failure: "terminal",
          exit_code: 1,
        });
        expect(e.message).toMatch(/^desired state is invalid \(\d+ errors?\)$/);
        expect(e.fix).toMatch(/nothing was started or stopped/);
        expect(e.issues.length).toBeGreaterThan(0);
        for (const i of e.issues as Doc[]) expect(text.stderr).toContain(`${i.file} ${i.path}: ${i.message}`);
      }
    }
    // Nothing acted on the invalid tree.
    expect(await listing(state)).toBeNull();

    const unknown = await runCli(["status", "engine-9", ...dirs(), "--format", "json"]);
    expect(unknown.code).toBe(1);
    expect(docOf(unknown, "Error", "json", "stderr")).toMatchObject({
      engine: "engine-9",
      input: "ENGINE argument",
      message: expect.stringMatching(/^no such engine in the state /),
      fix: expect.stringMatching(/narwhal status lists them/),
      exit_code: 1,
    });

    const missing = path.join(root, "runs", "not-prepared");
    const check = await runCli(["engine", "check", "--run", missing, "--state", state, "--format", "json"]);
    expect(check.code).toBe(1);
    const e = docOf(check, "Error", "json", "stderr");
    expect(e).toMatchObject({ name: "ActionError", step: "check", exit_code: 1, retryable: false });
    expect(e.message).toContain(missing);
    expect(typeof e.fix).toBe("string");
  });
});

describe("usage errors first: refused before any file is read or written", () => {
  let fleet: SimFleet;
  let root: string;
  let run: string;

  beforeAll(async () => {
    fleet = await simFleet({ engines: [{}] });
    root = path.dirname(fleet.dir);
    run = path.join(root, "runs", "engine-1");
    const r = await runCli(["engine", "prepare", "--desired", fleet.dir, "--engine", "engine-1", "--out", run]);
    expect(r.code, r.stderr).toBe(0);
  });

  /** `args` exits 1 with stderr matching `words`, and `root` (desired, runs, state) is exactly as before. */
  async function refused(args: string[], words: RegExp): Promise<CliResult> {
    const before = await listing(root);
    const r = await runCli(args);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(words);
    expect(r.stdout).toBe("");
    expect(await listing(root)).toEqual(before);
    expect(await listing(fleet.stateDir)).toBeNull();
    return r;
  }

  const state = () => ["--state", fleet.stateDir];

  it("cache-registration with both sources, or neither, names the options", async () => {
    const log = path.join(root, "startup.log");
    const layout = path.join(root, "layout.json");
    await refused(
      ["engine", "cache-registration", "--run", run, "--startup-log", log, "--runtime-layout", layout, ...state()],
      /--startup-log and --runtime-layout are exclusive/,
    );
    await refused(["engine", "cache-registration", "--run", run, ...state()], /--startup-log FILE or --runtime-layout/);
  });

  it("start-shared takes two to eight --run, each once", async () => {
    const nine = Array.from({ length: 9 }, (_, i) => ["--run", path.join(root, "runs", `r${i}`)]).flat();
    await refused(
      ["engine", "start-shared", ...nine, ...state()],
      /--run is given 9 time\(s\); start-shared takes 2 to 8/,
    );
    await refused(["engine", "start-shared", "--run", run, ...state()], /--run is given 1 time\(s\)/);
    await refused(["engine", "start-shared", "--run", run, "--run", run, ...state()], /--run names .* twice/);
  });

  it("one --run for every other action", async () => {
    await refused(
      ["engine", "check", "--run", run, "--run", run, ...state()],
      /--run is given 2 times; check takes one/,
    );
  });

  it("commander's usage errors exit 1 with the help hint, or an Error document in a machine format", async () => {
    const hint = /add --help for the options and exit codes/;
    await refused(["status", "--format", "xml", ...state()], /option '--format <format>' argument 'xml' is invalid/);
    await refused(["down", "--no-such-option", ...state()], hint);
    await refused(["engine", "check", "--bogus", ...state()], /unknown option '--bogus'[\s\S]*add --help/);
    await refused(["apply"], /missing required argument 'file'/);
    const r = await refused(["reconcile", "--once", "--bogus", ...state(), "--format", "json"], /"kind": "Error"/);
    expect(JSON.parse(r.stderr)).toMatchObject({
      apiVersion: "narwhal/v1",
      kind: "Error",
      name: "UsageError",
      input: "--bogus",
      message: "unknown option '--bogus'",
      exit_code: 1,
    });
  });

  it("down accepts --desired, as the README says every command reading desired/ does", async () => {
    const r = await runCli(["down", "--desired", fleet.dir, ...state(), "--format", "json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ kind: "DownResult", stopped: [], failed: [] });
  });
});
