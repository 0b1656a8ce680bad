// Watch mode's eyes: chokidar on the desired directory, debounced, so an
// editor's atomic save (write temp, rename) or a chunked write becomes one
// reload of a complete file. The debounce is the only wait: every chunk of a
// write is a change event that restarts it, so a file is read once it has been
// quiet for the debounce. chokidar's awaitWriteFinish would add its own
// stability wait (and size polls) on top of it for the same purpose; a write
// that pauses longer than the debounce is reloaded half-written, reported as
// invalid and ignored (the last valid desired state stays), then reloaded whole.
//
// A deleted file gets a grace period before the reload: tools that replace a
// file by delete-then-create (some editors, `git checkout`, config management)
// leave it missing for a moment, and reloading then would only log a spurious
// "is missing" error. Past the grace the reload runs and reports it; either
// way an invalid desired state never stops or starts anything (reconcile.ts
// keeps the last valid one), so the grace only spares the operator noise.
//
// File events are not enough on their own: a deploy that swaps the whole
// directory (`mv desired desired.old && mv new desired`, `ln -sfn`) leaves
// chokidar watching an inode nobody will write again, and some mounts send no
// events at all. So the three desired files are also stat'ed on a slow poll;
// a change the events missed (stable over two polls, so a file still being
// written is left alone) triggers the reload, and a replaced directory is
// watched afresh.
import { stat } from "node:fs/promises";
import { join } from "node:path";
import chokidar, { type FSWatcher } from "chokidar";

/** The files a reload reads (src/desired/load.ts). */
const DESIRED_FILES = ["deployment.env", "fleet.json", "engine-launch.json"];

export interface DesiredWatcher {
  close(): Promise<void>;
}

export interface WatchOptions {
  /** How long a deleted path may stay missing before the reload runs anyway (default max(1 s, 5 × debounce)). */
  missingGraceMs?: number;
  /** Period of the stat poll behind the file events (default max(1 s, 2 × debounce)). */
  pollMs?: number;
}

interface Signature {
  dir: string;
  files: string[];
}

async function signatureOf(dir: string): Promise<Signature> {
  const id = async (p: string) => {
    try {
      const s = await stat(p);
      return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}`;
    } catch {
      return "-";
    }
  };
  return { dir: await id(dir), files: await Promise.all(DESIRED_FILES.map((f) => id(join(dir, f)))) };
}

export function watchDesired(
  dir: string,
  debounceMs: number,
  onChange: () => void,
  options: WatchOptions = {},
): DesiredWatcher {
  const graceMs = options.missingGraceMs ?? Math.max(1000, 5 * debounceMs);
  const pollMs = options.pollMs ?? Math.max(1000, 2 * debounceMs);
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  // Paths deleted and not re-created yet, and until when the last deletion is excused.
  const missing = new Set<string>();
  let graceUntil = 0;
  // What the files looked like when the last reload was triggered, and at the previous poll.
  let atReload: Signature | undefined;
  let lastPoll: Signature | undefined;

  const fire = async () => {
    atReload = await signatureOf(dir).catch(() => undefined);
    missing.clear();
    if (!closed) onChange();
  };
  const kick = () => {
    clearTimeout(timer);
    const delay = missing.size > 0 ? Math.max(debounceMs, graceUntil - Date.now()) : debounceMs;
    // fire() does not reject: signatureOf never does, and onChange is the caller's synchronous callback.
    timer = setTimeout(() => void fire(), delay);
  };
  const markMissing = (p: string) => {
    missing.add(p);
    graceUntil = Date.now() + graceMs;
  };

  const watch = (): FSWatcher =>
    chokidar
      .watch(dir, {
        ignoreInitial: true,
        // Editors' swap and backup files are not desired state.
        ignored: (p: string) => /(^|\/)(\.#|#|~$|\.swp$|\.swx$|\.tmp$)/.test(p) || /\.(swp|swx|tmp)$/.test(p),
        atomic: true,
      })
      .on("add", (p: string) => (missing.delete(p), kick()))
      .on("change", kick)
      .on("unlink", (p: string) => (markMissing(p), kick()));
  let watcher = watch();

  const poll = async () => {
    const now = await signatureOf(dir);
    const prev = lastPoll;
    lastPoll = now;
    if (closed || !prev) return;
    if (now.dir !== prev.dir && now.dir !== "-") {
      // The directory was replaced: the old watcher sees nothing of the new one.
      const old = watcher;
      watcher = watch();
      // Not awaited: the poll goes on with the new watcher. The old one watches a directory that is
      // gone; if closing it fails there is nothing left to undo, so the failure is dropped here.
      void old.close().catch(() => undefined);
    }
    const same = (a: Signature | undefined, b: Signature) =>
      a !== undefined && a.files.every((f, i) => f === b.files[i]);
    // Changed since the last reload, and unchanged since the previous poll (not mid-write).
    if (atReload && !same(atReload, now) && same(prev, now)) {
      now.files.forEach((f, i) => {
        if (f === "-") markMissing(join(dir, DESIRED_FILES[i] as string));
      });
      atReload = now;
      kick();
    }
  };
  // Not awaited (the watcher is returned at once; the first poll or reload fills in what is still
  // unset); signatureOf never rejects: a file it cannot stat reads "-".
  void signatureOf(dir).then((s) => {
    atReload ??= s;
    lastPoll ??= s;
  });
  const poller = setInterval(() => void poll().catch(() => undefined), pollMs);
  poller.unref();

  return {
    close: async () => {
      closed = true;
      clearTimeout(timer);
      clearInterval(poller);
      await watcher.close();
    },
  };
}
