// Waiting for a condition that holds only between events (every engine
// settled, nothing queued): each waiter re-checks it whenever notify() says
// something moved, so no one polls.
export class SettleWaiters {
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly holds: () => boolean,
    /** Run before a waiter is released (e.g. flush state), whatever it yields. */
    private readonly beforeRelease: () => Promise<void>,
  ) {}

  notify(): void {
    for (const w of this.waiters) w();
  }

  /** Resolves once the condition holds (or the signal aborts). */
  wait(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (!this.holds() && !signal?.aborted) return;
        this.waiters.delete(check);
        // Released either way: a failure there is reported where it happens.
        void this.beforeRelease().then(resolve, resolve);
      };
      this.waiters.add(check);
      signal?.addEventListener("abort", check, { once: true });
      check();
    });
  }
}
