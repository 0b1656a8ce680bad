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
