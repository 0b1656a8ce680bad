// A counting semaphore: at most `max` holders at once, the rest wait in
// arrival order. Sessions on one SSH master connection are limited this way
// (sshd's MaxSessions, 10 by default): a session the master is refused makes
// the ssh client log in on its own, beside the master, where sshd's
// MaxStartups drops some of many concurrent logins.

export class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly max: number) {}

  /** Resolves with the release of one slot (calling it more than once releases once). */
  async acquire(): Promise<() => void> {
    if (this.used < this.max) this.used++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // A waiter takes the slot over as it is: the count stays.
      const next = this.waiting.shift();
      if (next) next();
      else this.used--;
    };
  }

  /** Run fn while holding a slot. */
  async with<T>(fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

/** fn over every item, at most `max` at once, the results in the items' order. */
export function mapBounded<T, R>(items: readonly T[], max: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const slots = new Slots(max);
  return Promise.all(items.map((item) => slots.with(() => fn(item))));
}
