// Watch mode's eyes: chokidar on the desired directory, debounced, waiting
// for writes to finish, so an editor's atomic save (write temp, rename) or a
// chunked write becomes one reload of a complete file.
import chokidar from "chokidar";

export interface DesiredWatcher {
  close(): Promise<void>;
}

export function watchDesired(dir: string, debounceMs: number, onChange: () => void): DesiredWatcher {
  let timer: NodeJS.Timeout | undefined;
  const watcher = chokidar.watch(dir, {
    ignoreInitial: true,
    // Editors' swap and backup files are not desired state.
    ignored: (p: string) => /(^|\/)(\.#|#|~$|\.swp$|\.swx$|\.tmp$)/.test(p) || /\.(swp|swx|tmp)$/.test(p),
    awaitWriteFinish: { stabilityThreshold: Math.max(50, Math.floor(debounceMs / 2)), pollInterval: 25 },
    atomic: true,
  });
  const kick = () => {
    clearTimeout(timer);
    timer = setTimeout(onChange, debounceMs);
  };
  watcher.on("add", kick).on("change", kick).on("unlink", kick);
  return {
    close: async () => {
      clearTimeout(timer);
      await watcher.close();
    },
  };
}
