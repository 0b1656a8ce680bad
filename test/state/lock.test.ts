// One controller per state directory: a live holder blocks, a dead one is
// taken over, and release only ever removes our own lock.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { acquireStateLock, readLockStatus } from "../../src/state/lock.js";
import { readBootId, readProcStat } from "../../src/backends/proc.js";
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

  it("does not take over a live holder on this host (pid 1, its own start ticks)", async () => {
    const init = await readProcStat(1);
    await writeFile(lockFile(), JSON.stringify({ pid: 1, start_ticks: init!.startTicks, host: os.hostname(), boot_id: await readBootId(), since: "2020-01-01T00:00:00.000Z" }));
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

describe("a lock holder is a pid plus its start time (pids are reused)", () => {
  let unrelated: ChildProcess;
  let ticks: number;
  beforeEach(async () => {
    // A live process that is not a controller, standing in for whatever reused a killed controller's pid.
    unrelated = spawn("sleep", ["1000"], { stdio: "ignore" });
    await new Promise((r) => unrelated.once("spawn", r));
    let stat = await readProcStat(unrelated.pid!);
    // Between fork and exec the child still shows node's command line; wait for sleep's own.
    while (!(await readFile(`/proc/${unrelated.pid}/cmdline`, "utf8")).startsWith("sleep")) stat = await readProcStat(unrelated.pid!);
    ticks = stat!.startTicks;
  });
  afterEach(() => {
    unrelated.kill("SIGKILL");
  });

  const lockNaming = async (over: Record<string, unknown>) =>
    writeFile(lockFile(), JSON.stringify({ pid: unrelated.pid, host: os.hostname(), boot_id: await readBootId(), since: new Date().toISOString(), ...over }));

  it("records this process's start ticks in the lock it takes", async () => {
    const lock = await acquireStateLock(state);
    const own = await readProcStat(process.pid);
    expect(JSON.parse(await readFile(lockFile(), "utf8"))).toMatchObject({ pid: process.pid, start_ticks: own!.startTicks });
    await lock.release();
  });

  it("takes over a lock whose pid now belongs to a process with another start time", async () => {
    await lockNaming({ start_ticks: ticks - 1 });
    const lock = await acquireStateLock(state);
    expect(JSON.parse(await readFile(lockFile(), "utf8"))).toMatchObject({ pid: process.pid });
    expect(unrelated.exitCode).toBeNull(); // the unrelated process is left alone
    await lock.release();
  });

  it("refuses while the recorded process still runs, naming its command line", async () => {
    await lockNaming({ start_ticks: ticks });
    const before = await readFile(lockFile(), "utf8");
    const err = await acquireStateLock(state).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(LockHeldError);
    expect((err as LockHeldError).message).toContain(`pid ${unrelated.pid} on ${os.hostname()}`);
    expect((err as LockHeldError).message).toContain("command line: sleep 1000");
    expect((err as LockHeldError).input).toBe(lockFile());
    expect(await readFile(lockFile(), "utf8")).toBe(before);
  });

  it("an older lock without start ticks: held while its pid lives, and the message tells how to tell", async () => {
    await lockNaming({});
    const err = await acquireStateLock(state).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(LockHeldError);
    expect((err as LockHeldError).message).toContain("command line: sleep 1000");
    expect((err as LockHeldError).fix).toContain(`if pid ${unrelated.pid} is not a narwhal controller, remove ${lockFile()}`);
  });

  it("an older lock without start ticks, taken well before its pid's process started, is stale", async () => {
    await lockNaming({ since: new Date(Date.now() - 3_600_000).toISOString() });
    const lock = await acquireStateLock(state);
    expect(lock.holder.pid).toBe(process.pid);
    await lock.release();
  });
});

describe("a lock path that is not a file", () => {
  it("refuses a FIFO at once, without blocking on it", async () => {
    spawnSync("mkfifo", [lockFile()]);
    expect((await stat(lockFile())).isFIFO()).toBe(true);
    await expect(acquireStateLock(state)).rejects.toThrow(/controller\.lock is a FIFO, not a lock file/);
  }, 5_000);

  it("refuses a directory with a message naming it", async () => {
    await mkdir(lockFile());
    await expect(acquireStateLock(state)).rejects.toMatchObject({ name: "LockHeldError", input: lockFile() });
  });
});

describe("readLockStatus: who holds the state, as `narwhal status` sees it without taking the lock", () => {
  it("is free with no lock file", async () => {
    expect(await readLockStatus(state)).toEqual({ kind: "free" });
  });

  it("names a live holder on this host, checked", async () => {
    const lock = await acquireStateLock(state);
    expect(await readLockStatus(state)).toEqual({ kind: "held", holder: lock.holder, checked: true });
    await lock.release();
    expect(await readLockStatus(state)).toEqual({ kind: "free" });
  });

  it("calls stale what a controller would take over: a dead pid, another boot, a reused pid", async () => {
    const me = { host: os.hostname(), boot_id: await readBootId(), since: "2020-01-01T00:00:00.000Z" };
    const init = await readProcStat(1);
    for (const holder of [
      { ...me, pid: deadPid() },
      { ...me, pid: 1, boot_id: "an-earlier-boot" },
      { ...me, pid: 1, start_ticks: init!.startTicks + 1 },
    ]) {
      await writeFile(lockFile(), JSON.stringify(holder));
      expect(await readLockStatus(state)).toEqual({ kind: "stale", holder });
    }
  });

  it("reads an older lock file without start ticks, and presumes a holder on another host alive, unchecked", async () => {
    const legacy = { pid: process.pid, host: os.hostname(), boot_id: await readBootId(), since: new Date().toISOString() };
    await writeFile(lockFile(), JSON.stringify(legacy));
    expect(await readLockStatus(state)).toEqual({ kind: "held", holder: legacy, checked: true });
    const remote = { pid: deadPid(), host: "some-other-host", boot_id: "x", since: "2020-01-01T00:00:00.000Z" };
    await writeFile(lockFile(), JSON.stringify(remote));
    expect(await readLockStatus(state)).toEqual({ kind: "held", holder: remote, checked: false });
  });

  it("says what a lock path that is not a file is", async () => {
    await mkdir(lockFile());
    expect(await readLockStatus(state)).toEqual({ kind: "not-regular", what: "a directory" });
  });
});
