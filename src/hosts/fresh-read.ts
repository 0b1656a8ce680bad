// A value read from a node and taken as current for a short time: the reads in flight or made within
// `freshMs` are shared, a failed read is not kept. The clock is monotonic (performance.now), so a wall
// clock step never makes an old read look fresh.

export class FreshRead<T> {
  private last: { at: number; value: Promise<T> } | undefined;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly freshMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get(): Promise<T> {
    const at = this.now();
    // Fresh from when the read began: one that took long is not kept longer for it.
    if (this.last && at - this.last.at < this.freshMs) return this.last.value;
    const entry = { at, value: this.read() };
    this.last = entry;
    entry.value.catch(() => {
      if (this.last === entry) this.last = undefined;
    });
    return entry.value;
  }
}
