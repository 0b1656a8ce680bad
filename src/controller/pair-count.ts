// Whether some pair of a fixed list still stands as engines are taken out one
// at a time. The rollout asks it for every unit it considers ("does a pair
// still serve without these engines?") and the proof restarts for every
// decode; computing the fleet's compatible pairs again for each question made
// a plan of a whole-fleet change at 1000 engines cost O(units × pairs): half a
// second, every time the controller planned. Here a question costs the pairs
// of the engines it names. Pure.
import type { Pair } from "./kv-pairs.js";
import { append } from "./map-lists.js";

export class PairCount {
  /** Pairs neither of whose engines is out. */
  #standing: number;
  readonly #out = new Set<string>();
  /** Indices into the pair list, by engine. */
  readonly #byEngine = new Map<string, number[]>();
  readonly #pairs: readonly Pair[];

  constructor(pairs: readonly Pair[]) {
    this.#pairs = pairs;
    this.#standing = pairs.length;
    pairs.forEach((p, i) => {
      append(this.#byEngine, p.prefill, i);
      append(this.#byEngine, p.decode, i);
    });
  }

  /** Takes `engine` out for good: its pairs no longer stand. */
  takeOut(engine: string): void {
    if (this.#out.has(engine)) return;
    this.#standing -= this.#standingOf([engine]).size;
    this.#out.add(engine);
  }

  /** Some pair stands without `engines` (and without those taken out). */
  standsWithout(engines: Iterable<string> = []): boolean {
    return this.#standing - this.#standingOf(engines).size > 0;
  }

  /** The standing pairs of `engines` (a pair of two of them once). */
  #standingOf(engines: Iterable<string>): Set<number> {
    const hit = new Set<number>();
    for (const e of engines) {
      if (this.#out.has(e)) continue;
      for (const i of this.#byEngine.get(e) ?? []) {
        const p = this.#pairs[i]!;
        if (!this.#out.has(p.prefill) && !this.#out.has(p.decode)) hit.add(i);
      }
    }
    return hit;
  }
}
