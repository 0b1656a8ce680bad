// ScansAfterRequest's schedule, against a scan whose end the test decides: a request is answered by a scan
// that began after it, the requests made during one scan by one scan after it (all their names), each told
// only its own names.
import { describe, expect, it } from "vitest";
import { ScansAfterRequest } from "../../src/hosts/scan-after.js";
import type { LeaderScan } from "../../src/hosts/types.js";

/** The scans begun, in order: the names each was asked for, and how to end it. */
function scans() {
  const begun: Array<{ names: string[]; end: (scan: LeaderScan) => void; fail: (err: Error) => void }> = [];
  const scanner = new ScansAfterRequest(
    (names) =>
      new Promise<LeaderScan>((end, fail) => {
        begun.push({ names: [...names].sort(), end, fail });
      }),
  );
  return { scanner, begun };
}

/** A scan in which leader 10 has every name asked for and a cwd, leader 11 none. */
const table = (names: string[], mark: string): LeaderScan => ({
  bootId: mark,
  leaders: [10, 11].map((pid) => ({ pid, pgid: pid, startTicks: 1, state: "S" })),
  envs: new Map([
    [10, Object.fromEntries(names.map((n) => [n, `${n}-${mark}`]))],
    [11, {}],
  ]),
  cwds: new Map([[10, "/run"]]),
});

const settle = () => new Promise((r) => setImmediate(r));

describe("ScansAfterRequest", () => {
  it("answers the requests made before a scan begins with that one scan, each with its own names", async () => {
    const { scanner, begun } = scans();
    const a = scanner.scan(["A"]);
    const b = scanner.scan(["B"]);
    await settle();
    expect(begun.map((s) => s.names)).toEqual([["A", "B"]]);
    begun[0]!.end(table(["A", "B"], "first"));
    expect((await a).envs).toEqual(
      new Map([
        [10, { A: "A-first" }],
        [11, {}],
      ]),
    );
    expect((await b).envs).toEqual(
      new Map([
        [10, { B: "B-first" }],
        [11, {}],
      ]),
    );
    expect((await a).cwds).toEqual(new Map([[10, "/run"]]));
  });

  it("answers a request made while a scan runs with the next one, begun after it ends, shared by all made meanwhile", async () => {
    const { scanner, begun } = scans();
    const first = scanner.scan(["A"]);
    await settle();
    const later = [scanner.scan(["A"]), scanner.scan(["C"]), scanner.scan(["A"])];
    await settle();
    expect(begun).toHaveLength(1); // the next waits for the first to end
    begun[0]!.end(table(["A"], "first"));
    expect((await first).bootId).toBe("first");
    await settle();
    expect(begun.map((s) => s.names)).toEqual([["A"], ["A", "C"]]);
    begun[1]!.end(table(["A", "C"], "second"));
    const [a, c] = await Promise.all(later);
    expect([a!.bootId, c!.bootId]).toEqual(["second", "second"]);
    // Told only its names: the leader with none of them has no cwd either.
    expect(c!.envs.get(10)).toEqual({ C: "C-second" });
  });

  it("fails every request a failed scan answers, and the next request begins a scan of its own", async () => {
    const { scanner, begun } = scans();
    const first = scanner.scan(["A"]);
    await settle();
    const waiting = [scanner.scan(["A"]), scanner.scan(["B"])];
    begun[0]!.fail(new Error("node gone"));
    await expect(first).rejects.toThrow("node gone");
    await settle();
    begun[1]!.fail(new Error("still gone"));
    for (const w of waiting) await expect(w).rejects.toThrow("still gone");
    const again = scanner.scan(["A"]);
    await settle();
    expect(begun).toHaveLength(3);
    begun[2]!.end(table(["A"], "back"));
    expect((await again).bootId).toBe("back");
  });
});
