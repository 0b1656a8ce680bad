// Counting runs of one piece of work (the fleet's observe-and-plan) so that a
// caller can wait for a run that began after it asked: everything it saw
// happen before asking is then reflected in that run's result.
export class Generations {
  private begun = 0;
  private done = 0;
  private readonly waiters: Array<{ after: number; resolve: () => void }> = [];

  begin(): number {
    return ++this.begun;
  }

  /** Runs begun so far. */
  get count(): number {
    return this.begun;
  }

  end(run: number): void {
    this.done = Math.max(this.done, run);
    for (const w of this.waiters.splice(0)) {
      if (w.after < this.done) w.resolve();
      else this.waiters.push(w);
    }
  }

  /** Resolves when a run that begins after this call has ended. */
  next(): Promise<void> {
    const after = this.begun;
    return new Promise<void>((resolve) => this.waiters.push({ after, resolve }));
  }
}
