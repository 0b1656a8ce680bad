// Watch mode's eyes: chokidar on the desired directory, debounced, waiting
// for writes to finish, so an editor's atomic save (write temp, rename) or a
// chunked write becomes one reload of a complete file.
//
// A deleted file gets a grace period before the reload: tools that replace a
// file by delete-then-create (some editors, `git checkout`, config management)
// leave it missing for a moment, and reloading then would only log a spurious
// "is missing" error. Past the grace the reload runs and reports it; either
// way an invalid desired state never stops or starts anything (reconcile.ts
// keeps the last valid one), so the grace only spares the operator noise.
import chokidar from "chokidar";

export interface DesiredWatcher {
  close(): Promise<void>;
}

export interface WatchOptions {
  /** How long a deleted path may stay missing before the reload runs anyway (default max(1 s, 5 × debounce)). */
  missingGraceMs?: number;
}

export function watchDesired(dir: string, debounceMs: number, onChange: () => void, options: WatchOptions = {}): DesiredWatcher {
  const graceMs = options.missingGraceMs ?? Math.max(1000, 5 * debounceMs);
  let timer: NodeJS.Timeout | undefined;
  // Paths deleted and not re-created yet, and until when the last deletion is excused.
  const missing = new Set<string>();
  let graceUntil = 0;
  const watcher = chokidar.watch(dir, {
    ignoreInitial: true,
    // Editors' swap and backup files are not desired state.
    ignored: (p: string) => /(^|\/)(\.#|#|~$|\.swp$|\.swx$|\.tmp$)/.test(p) || /\.(swp|swx|tmp)$/.test(p),
    awaitWriteFinish: { stabilityThreshold: Math.max(50, Math.floor(debounceMs / 2)), pollInterval: 25 },
    atomic: true,
  });
  const kick = () => {
    clearTimeout(timer);
    const delay = missing.size > 0 ? Math.max(debounceMs, graceUntil - Date.now()) : debounceMs;
    timer = setTimeout(() => {
      missing.clear();
      onChange();
    }, delay);
  };
  watcher
    .on("add", (p: string) => (missing.delete(p), kick()))
    .on("change", kick)
    .on("unlink", (p: string) => {
      missing.add(p);
      graceUntil = Date.now() + graceMs;
      kick();
    });
  return {
    close: async () => {
      clearTimeout(timer);
      await watcher.close();
    },
  };
}
