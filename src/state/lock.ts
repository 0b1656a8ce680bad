// One controller per state directory. The lock file names its holder (pid,
// host, boot id, since); a holder whose process is gone (or whose machine
// rebooted) is stale and taken over, so a SIGKILLed controller never blocks
// the next one.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { LockHeldError } from "../errors.js";
import { readBootId } from "../backends/proc.js";

export interface LockHolder {
  pid: number;
  host: string;
  boot_id: string;
  since: string;
}

export interface StateLock {
  holder: LockHolder;
  release(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function readHolder(file: string): Promise<LockHolder | null> {
  try {
    return JSON.parse(await fs.readFile(file, "utf8")) as LockHolder;
  } catch {
    return null; // absent or half-written by a killed holder: both mean "no live holder"
  }
}

export async function acquireStateLock(stateDir: string): Promise<StateLock> {
  await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const file = path.join(stateDir, "controller.lock");
  const me: LockHolder = { pid: process.pid, host: os.hostname(), boot_id: await readBootId(), since: new Date().toISOString() };
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      // Write the holder record in full, then link it into place: link() fails if the lock exists,
      // and a reader never sees an empty or half-written lock file that it would take for stale.
      const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
      await fs.writeFile(tmp, JSON.stringify(me), { mode: 0o600 });
      try {
        await fs.link(tmp, file);
      } finally {
        await fs.rm(tmp, { force: true });
      }
      return {
        holder: me,
        release: async () => {
          const current = await readHolder(file);
          // `since` too: a stale handle of this same process must not remove a lock it re-acquired later.
          if (current?.pid === me.pid && current.boot_id === me.boot_id && current.since === me.since) await fs.rm(file, { force: true });
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const seen = await fs.readFile(file, "utf8").catch(() => "");
    const holder = await readHolder(file);
    const stale =
      holder === null ||
      (holder.host === me.host && (holder.boot_id !== me.boot_id || !alive(holder.pid)));
    if (!stale) {
      throw new LockHeldError(
        `state directory ${stateDir} is held by another controller (pid ${holder.pid} on ${holder.host} since ${holder.since})`,
        { input: file, fix: "Stop that controller first, or use another --state directory.", retryable: false },
      );
    }
    // Stale: move exactly that lock aside and race for it again; link() decides the winner. Moving
    // (not removing by path) lets a controller that lost the race see it took a fresh lock, and put it back.
    const aside = `${file}.stale.${process.pid}.${Date.now()}`;
    try {
      await fs.rename(file, aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw err;
    }
    if ((await fs.readFile(aside, "utf8").catch(() => "")) !== seen) await fs.link(aside, file).catch(() => undefined);
    await fs.rm(aside, { force: true });
  }
  throw new LockHeldError(`could not take the state lock ${file}`, { retryable: true });
}
