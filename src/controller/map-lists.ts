// Lists kept in a Map by key, grown in place: `m.set(k, [...(m.get(k) ?? []), v])` copies the list at
// every entry, quadratic in a key's entries (a decode's pairs, a class's engines at 1000 engines).

/** Add `v` to the list under `k` in place. */
export function append<K, V>(m: Map<K, V[]>, k: K, v: V): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}
