// Kill points for crash testing: NARWHAL_FAILPOINTS="name@n,other@m" makes the
// controller SIGKILL itself the n-th time it passes `name`. Unset (always in
// production), a failpoint is a no-op. Passed around as a value, never global.
export type Failpoint = (name: string) => void;

export const noFailpoints: Failpoint = () => undefined;

export function parseFailpoints(spec: string | undefined): Map<string, number> {
  const points = new Map<string, number>();
  for (const part of (spec ?? "")
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = part.lastIndexOf("@");
    const name = at > 0 ? part.slice(0, at) : part;
    const n = at > 0 ? Number(part.slice(at + 1)) : 1;
    if (!Number.isInteger(n) || n < 1)
      throw new Error(`NARWHAL_FAILPOINTS: "${part}" needs a positive hit count (name@n)`);
    points.set(name, n);
  }
  return points;
}

/** A failpoint function that kills this process at the configured hits. */
export function failpoints(
  spec: string | undefined,
  kill: () => void = () => process.kill(process.pid, "SIGKILL"),
): Failpoint {
  const points = parseFailpoints(spec);
  if (points.size === 0) return noFailpoints;
  const hits = new Map<string, number>();
  return (name) => {
    const n = (hits.get(name) ?? 0) + 1;
    hits.set(name, n);
    if (points.get(name) === n) kill();
  };
}
