// What `narwhal status` reads beside the state: desired/ now, loaded the way
// the controller loads it, and said once (not thrown) when it cannot be used.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { controllerNow, desiredNow } from "../../src/cli/status-read.js";
import { acquireStateLock } from "../../src/state/lock.js";
import { readBootId } from "../../src/backends/proc.js";
import { loadDesired } from "../../src/desired/load.js";
import { validTree, writeTree } from "../desired/fixtures.js";
import { DESIRED_SUMMARY_FILE, writeDesiredSummary } from "../../src/state/desired-summary.js";
import { recordedTree, RECORD_BREAKING_CHANGES } from "../state/recorded-summary.js";

describe("status: desired/ now", () => {
  it("gives each desired engine the input hash the controller would apply", async () => {
    const dir = await writeTree(validTree());
    const now = await desiredNow(dir);
    const specs = (await loadDesired(dir)).specs;
    expect(now).toMatchObject({ dir, valid: true, issues: 0, problem: null });
    expect(now.engines).toEqual(
      Object.fromEntries(specs.map((s) => [s.name, { input_hash: s.input_hash, backend: s.backend, role: s.role }])),
    );
  });

  it("counts the errors of an invalid desired/ and says to run validate, instead of failing", async () => {
    const dir = await writeTree(validTree(), { fleet: "{ not json" });
    const now = await desiredNow(dir);
    expect(now).toMatchObject({ valid: false, engines: null });
    expect(now.issues).toBeGreaterThan(0);
    expect(now.problem).toBe(
      `desired state ${dir} is invalid (${now.issues} error${now.issues === 1 ? "" : "s"}): run narwhal validate --desired ${dir}; DESIRED shows ?`,
    );
  });

  it("says a missing desired/ does not exist, once, rather than listing each missing file", async () => {
    const dir = await writeTree(validTree());
    await fs.rm(dir, { recursive: true });
    expect(await desiredNow(dir)).toEqual({
      dir,
      valid: false,
      engines: null,
      issues: 0,
      problem: `desired state ${dir} does not exist (set --desired DIR or NARWHAL_DESIRED); DESIRED shows ?`,
    });
  });
});

describe("status: desired/ as the controller recorded it (state/desired-summary.json)", () => {
  it("is written again only when it would say something else (a no-op's controller rewrites nothing)", async () => {
    const dir = await writeTree(validTree());
    const stateDir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-status-summary-"));
    const file = path.join(stateDir, DESIRED_SUMMARY_FILE);
    expect(await writeDesiredSummary(stateDir, await loadDesired(dir))).toBe(true);
    const first = await fs.stat(file);
    expect(await writeDesiredSummary(stateDir, await loadDesired(dir))).toBe(true);
    const again = await fs.stat(file);
    expect([again.ino, again.mtimeMs]).toEqual([first.ino, first.mtimeMs]);
    await fs.appendFile(path.join(dir, "fleet.json"), "\n"); // another key
    expect(await writeDesiredSummary(stateDir, await loadDesired(dir))).toBe(true);
    expect((await fs.stat(file)).ino).not.toBe(first.ino); // replaced by rename
    expect(await hashOf(dir, stateDir)).toBeDefined();
  });

  const hashOf = async (dir: string, stateDir: string) => (await desiredNow(dir, stateDir)).engines?.["engine-1"];

  it("takes the recorded engines while desired/ reads as it was validated", async () => {
    const { dir, stateDir } = await recordedTree();
    expect(await hashOf(dir, stateDir)).toEqual({ input_hash: "recorded", backend: "container", role: "prefill" });
  });

  it.each(RECORD_BREAKING_CHANGES)("validates desired/ again when %s", async (_what, change) => {
    const { dir, stateDir } = await recordedTree();
    await change(dir);
    const now = await desiredNow(dir, stateDir);
    expect(now.engines?.["engine-1"]?.input_hash ?? "invalid").not.toBe("recorded");
    expect(now).toEqual(await desiredNow(dir));
  });

  it("validates desired/ again when the summary is not one (malformed, or not a regular file)", async () => {
    const { dir, stateDir } = await recordedTree();
    const file = path.join(stateDir, DESIRED_SUMMARY_FILE);
    await fs.writeFile(file, '{"key": 1}');
    expect((await hashOf(dir, stateDir))?.input_hash).not.toBe("recorded");
    await fs.rm(file);
    await fs.mkdir(file);
    expect(await desiredNow(dir, stateDir)).toEqual(await desiredNow(dir));
  });
});

describe("status: the controller holding the state", () => {
  const made: string[] = [];
  const stateDir = async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "narwhal-status-lock-"));
    made.push(dir);
    return dir;
  };
  afterAll(async () => {
    for (const d of made) await fs.rm(d, { recursive: true, force: true });
  });

  it("is not running with no lock, and says when the state was last written", async () => {
    const dir = await stateDir();
    expect(await controllerNow(dir)).toEqual({
      running: false,
      holder: null,
      stale: false,
      remote: false,
      problem: null,
      state_written_at: null,
    });
    await fs.writeFile(path.join(dir, "narwhal.json"), "{}");
    const mtime = (await fs.stat(path.join(dir, "narwhal.json"))).mtime.toISOString();
    expect((await controllerNow(dir)).state_written_at).toBe(mtime);
  });

  it("names the live holder, and calls a dead one's lock stale", async () => {
    const dir = await stateDir();
    const lock = await acquireStateLock(dir);
    expect(await controllerNow(dir)).toMatchObject({ running: true, holder: lock.holder, stale: false, remote: false });
    await lock.release();
    const dead = {
      pid: spawnSync(process.execPath, ["-e", "0"]).pid!,
      host: os.hostname(),
      boot_id: await readBootId(),
      since: "2020-01-01T00:00:00.000Z",
    };
    await fs.writeFile(path.join(dir, "controller.lock"), JSON.stringify(dead));
    expect(await controllerNow(dir)).toMatchObject({ running: false, holder: dead, stale: true });
  });

  it("cannot tell when the lock path is not a file, and says so", async () => {
    const dir = await stateDir();
    await fs.mkdir(path.join(dir, "controller.lock"));
    expect(await controllerNow(dir)).toMatchObject({
      running: null,
      problem: "the state lock is a directory, not a lock file",
    });
  });
});
