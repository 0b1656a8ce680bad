// "Did you mean X?" for names an operator wrote by hand (record fields,
// deployment variables). A suggestion is only made when one known name is
// close: a wrong guess would send the operator after the wrong field, which is
// worse than no guess at all.

/**
 * Optimal-string-alignment distance: insertions, deletions, substitutions and
 * swaps of two neighbouring characters (the usual typing slips) cost 1 each.
 */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row: number[] = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((rows[i - 1] as number[])[j]! + 1, row[j - 1]! + 1, (rows[i - 1] as number[])[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, (rows[i - 2] as number[])[j - 2]! + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return (rows[a.length] as number[])[b.length]!;
}

/**
 * The known name `word` most likely misspells, or undefined when none is close.
 * Close means at most one edit per four characters of the known name and never
 * more than two (so "gpu_id" → "gpu_ids", "NARWHAL_READY_SECOND" →
 * "NARWHAL_READY_SECONDS", but "gpus" and "NARWHAL_MODEL_TAG" suggest nothing),
 * case ignored; a tie between two names suggests neither.
 */
export function closestName(word: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  let tied = false;
  const w = word.toLowerCase();
  for (const name of known) {
    if (name === word) return undefined;
    if (Math.abs(name.length - word.length) > 2) continue; // more than two edits apart whatever the letters
    const d = editDistance(w, name.toLowerCase());
    if (d > Math.min(2, Math.max(1, Math.floor(name.length / 4)))) continue;
    if (d < bestDistance) {
      best = name;
      bestDistance = d;
      tied = false;
    } else if (d === bestDistance && name !== best) tied = true;
  }
  return tied ? undefined : best;
}
