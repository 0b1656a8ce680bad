// One controller per state directory: a live holder blocks, a dead one is
// taken over, and release only ever removes our own lock.
import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { acquireStateLock } from "../../src/state/lock.js";
import { readBootId } from "../../src/backends/proc.js";
import { LockHeldError } from "../../src/errors.js";

let state: string;
beforeEach(async () => {
  state = await mkdtemp(path.join(tmpdir(), "narwhal-lock-"));
});
afterEach(async () => {
  await rm(state, { recursive: true, force: true });
});

const lockFile = () => path.join(state, "controller.lock");

/** The pid of a process that has already exited (and been reaped). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "0"]);
  expect(child.pid).toBeGreaterThan(0);
  return child.pid!;
}

describe("acquireStateLock", () => {
  it("writes a 0600 lock file naming this process", async () => {
    const lock = await acquireStateLock(state);
    const holder = JSON.parse(await readFile(lockFile(), "utf8")) as Record<string, unknown>;
    expect(holder).toMatchObject({ pid: process.pid, host: os.hostname(), boot_id: await readBootId() });
    expect(holder).toEqual(lock.holder);
    expect((await stat(lockFile())).mode & 0o777).toBe(0o600);
    await lock.release();
  });

  it("a second acquire throws LockHeldError naming pid, host and since", async () => {
    const lock = await acquireStateLock(state);
    const err = await acquireStateLock(state).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(LockHeldError);
    const message = (err as LockHeldError).message;
    expect(message).toContain(`pid ${process.pid}`);
    expect(message).toContain(os.hostname());
    expect(message).toContain(lock.holder.since);
    expect((err as LockHeldError).retryable).toBe(false);
    await lock.release();
  });

  it("takes over a lock naming a dead pid on this host and boot", async () => {
    const dead = deadPid();
    await writeFile(lockFile(), JSON.stringify({ pid: dead, host: os.hostname(), boot_id: await readBootId(), since: "2020-01-01T00:00:00.000Z" }));
    const lock = await acquireStateLock(state);
    expect(JSON.parse(await readFile(lockFile(), "utf8"))).toMatchObject({ pid: process.pid });
    await lock.release();
  });

  it("takes over a lock from before a reboot even if its pid is alive now", async () => {
    await writeFile(lockFile(), JSON.stringify({ pid: 1, host: os.hostname(), boot_id: "an-earlier-boot", since: "2020-01-01T00:00:00.000Z" }));
    const lock = await acquireStateLock(state);
    expect(lock.holder.pid).toBe(process.pid);
    await lock.release();
  });

  it("takes over an empty (half-written) lock file", async () => {
    await writeFile(lockFile(), "");
    const lock = await acquireStateLock(state);
    expect(lock.holder.pid).toBe(process.pid);
    await lock.release();
  });

  it("does not take over a live holder on this host (pid 1)", async () => {
    await writeFile(lockFile(), JSON.stringify({ pid: 1, host: os.hostname(), boot_id: await readBootId(), since: "2020-01-01T00:00:00.000Z" }));
    await expect(acquireStateLock(state)).rejects.toThrow(/pid 1 on .* since 2020-01-01/);
  });

  it("does not take over a holder on another host, whose pid it cannot check", async () => {
    await writeFile(lockFile(), JSON.stringify({ pid: deadPid(), host: "some-other-host", boot_id: "x", since: "2020-01-01T00:00:00.000Z" }));
    await expect(acquireStateLock(state)).rejects.toBeInstanceOf(LockHeldError);
  });
});

describe("release", () => {
  it("removes our own lock so the next acquire succeeds", async () => {
    const lock = await acquireStateLock(state);
    await lock.release();
    await expect(stat(lockFile())).rejects.toMatchObject({ code: "ENOENT" });
    const next = await acquireStateLock(state);
    await next.release();
  });

  it("leaves a lock that another controller took over", async () => {
    const lock = await acquireStateLock(state);
    const other = JSON.stringify({ pid: 1, host: os.hostname(), boot_id: await readBootId(), since: "2030-01-01T00:00:00.000Z" });
    await writeFile(lockFile(), other);
    await lock.release();
    expect(await readFile(lockFile(), "utf8")).toBe(other);
  });

  it("a stale handle's second release does not remove a newer lock of the same process", async () => {
    const first = await acquireStateLock(state);
    await first.release();
    await new Promise((r) => setTimeout(r, 5)); // a distinct `since`
    const second = await acquireStateLock(state);
    await first.release();
    expect(JSON.parse(await readFile(lockFile(), "utf8"))).toEqual(second.holder);
    await second.release();
  });
});
