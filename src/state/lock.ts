// One controller per state directory. The lock file names its holder (pid,
// process start ticks, host, boot id, since); a holder whose process is gone,
// whose pid now belongs to another process (other start ticks), or whose
// machine rebooted is stale and taken over, so a SIGKILLed controller never
// blocks the next one.
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import * as z from "zod";
import { LockHeldError } from "../errors.js";
import { processExists, processStartedAtMs, readBootId, readProcCmdline, readProcStat } from "../backends/proc.js";
import { readRegularFile, writeFileExclusive } from "./atomic-file.js";

const LockHolderSchema = z
  .looseObject({
    pid: z.number().int().positive().describe("pid of the controller holding the lock"),
    start_ticks: z
      .number()
      .int()
      .nonnegative()
      .optional()
      .describe("its start time (field 22 of /proc/<pid>/stat): a pid alone is reused; absent in locks of older narwhal versions"),
    host: z.string().describe("hostname the holder runs on; a holder on another host cannot be checked"),
    boot_id: z.string().describe("kernel boot id when the lock was taken; another boot means the holder is gone"),
    since: z.string().describe("ISO time the lock was taken"),
  })
  .describe("controller.lock: who holds the state directory");

export type LockHolder = z.infer<typeof LockHolderSchema>;

export interface StateLock {
  holder: LockHolder;
  release(): Promise<void>;
}

/**
 * A lock written before locks carried start ticks names only a pid. Its pid counts as the holder unless the
 * process now at that pid started clearly after the lock was taken; the margin absorbs btime's one-second
 * resolution and small clock steps, so a live holder is never taken over because the clock moved.
 */
const LEGACY_REUSE_MARGIN_MS = 60_000;

type Read = { kind: "holder"; holder: LockHolder; text: string } | { kind: "none"; text: string } | { kind: "not-regular"; what: string };

async function readLock(file: string): Promise<Read> {
  const read = await readRegularFile(file);
  if (read.kind === "not-regular") return read;
  if (read.kind === "missing") return { kind: "none", text: "" };
  try {
    const parsed = LockHolderSchema.safeParse(JSON.parse(read.text));
    if (parsed.success) return { kind: "holder", holder: parsed.data, text: read.text };
  } catch {
    /* half-written by a killed holder (older versions wrote in place): no live holder */
  }
  return { kind: "none", text: read.text };
}

/** Whether the recorded holder still runs here: "gone" is taken over; a holder on another host is presumed alive. */
async function holderGone(holder: LockHolder, me: Pick<LockHolder, "host" | "boot_id">): Promise<boolean> {
  if (holder.host !== me.host) return false;
  if (holder.boot_id !== me.boot_id) return true;
  const stat = await readProcStat(holder.pid);
  if (stat === null) return !processExists(holder.pid); // /proc hidden (hidepid): an existing pid cannot be ruled out
  if (stat.state === "Z") return true;
  if (holder.start_ticks !== undefined) return stat.startTicks !== holder.start_ticks;
  const started = await processStartedAtMs(stat.startTicks);
  const since = Date.parse(holder.since);
  return started !== null && Number.isFinite(since) && started > since + LEGACY_REUSE_MARGIN_MS;
}

export function lockFilePath(stateDir: string): string {
  return path.join(stateDir, "controller.lock");
}

/**
 * Who holds the state directory, as a reader sees it without taking the lock (`narwhal status`):
 * judged by the same check a controller uses for stale takeover, so both agree on "running".
 */
export type LockStatus =
  | { kind: "free" }
  /** `checked`: the holder runs on this host and was found alive; false: another host, presumed alive. */
  | { kind: "held"; holder: LockHolder; checked: boolean }
  | { kind: "stale"; holder: LockHolder }
  | { kind: "not-regular"; what: string };

export async function readLockStatus(stateDir: string): Promise<LockStatus> {
  const seen = await readLock(lockFilePath(stateDir));
  if (seen.kind === "not-regular") return seen;
  if (seen.kind === "none") return { kind: "free" };
  const here = { host: os.hostname(), boot_id: await readBootId() };
  if (await holderGone(seen.holder, here)) return { kind: "stale", holder: seen.holder };
  return { kind: "held", holder: seen.holder, checked: seen.holder.host === here.host };
}

export async function acquireStateLock(stateDir: string): Promise<StateLock> {
  await fs.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const file = lockFilePath(stateDir);
  const own = await readProcStat(process.pid);
  const me: LockHolder = {
    pid: process.pid,
    ...(own ? { start_ticks: own.startTicks } : {}),
    host: os.hostname(),
    boot_id: await readBootId(),
    since: new Date().toISOString(),
  };
  for (let attempt = 0; attempt < 3; attempt++) {
    // Written in full, then link()ed into place: link() fails if the lock exists,
    // and a reader never sees an empty or half-written lock file that it would take for stale.
    if (await writeFileExclusive(file, JSON.stringify(me), 0o600)) {
      return {
        holder: me,
        release: async () => {
          const current = await readLock(file);
          const held = current.kind === "holder" ? current.holder : null;
          // `since` too: a stale handle of this same process must not remove a lock it re-acquired later.
          if (held?.pid === me.pid && held.boot_id === me.boot_id && held.since === me.since) await fs.rm(file, { force: true });
        },
      };
    }
    const seen = await readLock(file);
    if (seen.kind === "not-regular") {
      throw new LockHeldError(`the state lock ${file} is ${seen.what}, not a lock file`, {
        step: "state",
        input: file,
        fix: `Remove ${file} (no controller ever creates it as ${seen.what}), then run the command again.`,
        retryable: false,
      });
    }
    if (seen.kind === "holder" && !(await holderGone(seen.holder, me))) throw await heldError(stateDir, file, seen.holder, me);
    // Stale: move exactly that lock aside and race for it again; link() decides the winner. Moving
    // (not removing by path) lets a controller that lost the race see it took a fresh lock, and put it back.
    const aside = `${file}.stale.${process.pid}.${Date.now()}`;
    try {
      await fs.rename(file, aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw err;
    }
    const moved = await readLock(aside);
    if (moved.kind === "not-regular" || moved.text !== seen.text) await fs.link(aside, file).catch(() => undefined);
    await fs.rm(aside, { force: true });
  }
  throw new LockHeldError(`could not take the state lock ${file}`, { step: "state", input: file, retryable: true });
}

async function heldError(stateDir: string, file: string, holder: LockHolder, me: LockHolder): Promise<LockHeldError> {
  // Only a holder on this host has a command line we can read; it tells the operator what they would be stopping.
  const cmdline = holder.host === me.host ? await readProcCmdline(holder.pid) : null;
  const shown = cmdline && cmdline.length > 300 ? `${cmdline.slice(0, 300)}…` : cmdline;
  const legacy = holder.start_ticks === undefined && holder.host === me.host;
  return new LockHeldError(
    `state directory ${stateDir} is held by another controller (pid ${holder.pid} on ${holder.host} since ${holder.since}${shown ? `, command line: ${shown}` : ""})`,
    {
      step: "state",
      input: file,
      fix: legacy
        ? `Stop that controller first, or use another --state directory. The lock predates start-time identity: if pid ${holder.pid} is not a narwhal controller, remove ${file}.`
        : "Stop that controller first, or use another --state directory.",
      retryable: false,
    },
  );
}
